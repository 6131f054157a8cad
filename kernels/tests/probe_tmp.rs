use kernelc_kernels::conformance::{cases, Interpreter};
use kernelc_kernels::lower::{lower, TargetCaps};
use kernelc_kernels::spec::OpSpec;
#[test]
fn probe() {
    for base in [TargetCaps::cpu()] { let caps = TargetCaps { max_kernel_elements: cases::SPLIT_LIMIT, f16: true, ..base };
    let specs = std::fs::read_to_string("/tmp/probe/specs.txt").unwrap();
    for line in specs.lines().filter(|l| !l.trim().is_empty()) {
        let spec: OpSpec = match serde_json::from_str(line) { Ok(s) => s, Err(e) => { println!("BADJSON {line}: {e}"); continue } };
        match lower(&spec, &caps) {
            Ok(p) => {
                let r = kernelc_kernels::conformance::check(&Interpreter::new("i", caps.clone()), &spec, 7);
                println!("OK {} launches {}: {:?}", p.launches.len(), line, r.err().map(|f| format!("{f:?}").chars().take(300).collect::<String>()));
            }
            Err(e) => println!("ERR {line}: {e}"),
        }
    }
}}
