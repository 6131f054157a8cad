use kernelc_ir::ScalarType::{self, *};
use kernelc_kernels::conformance::{check, Interpreter};
use kernelc_kernels::lower::TargetCaps;
use kernelc_kernels::spec::*;

struct R(u64);
impl R {
    fn n(&mut self, k: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % k
    }
    fn dim(&mut self) -> usize {
        [1, 2, 3, 5, 100, 257, 1024, 3000, 9000, 20000, 64, 4, 8][self.n(13) as usize]
    }
    fn shape(&mut self, rank: usize) -> Vec<usize> {
        (0..rank).map(|_| self.dim()).collect()
    }
    fn fl(&mut self) -> ScalarType {
        [F32, F64, F16, Bf16][self.n(4) as usize]
    }
    fn b(&mut self) -> bool {
        self.n(2) == 1
    }
}

fn spec(r: &mut R) -> OpSpec {
    let rank = 1 + r.n(3) as usize;
    match r.n(8) {
        0 => {
            let shape = r.shape(rank);
            let mut axes: Vec<usize> = (0..rank).filter(|_| r.b()).collect();
            if axes.is_empty() {
                axes.push(r.n(rank as u64) as usize);
            }
            let func = [
                ReduceFn::Sum,
                ReduceFn::Mean,
                ReduceFn::Max,
                ReduceFn::Min,
                ReduceFn::ArgMax,
                ReduceFn::ArgMin,
            ][r.n(6) as usize];
            let dtype = if func == ReduceFn::Mean {
                r.fl()
            } else {
                [F32, F64, F16, Bf16, I32, U32][r.n(6) as usize]
            };
            let index_dtype = func.is_arg().then(|| [U32, I32, F32][r.n(3) as usize]);
            let accumulate = !func.is_arg() && r.b();
            OpSpec::Reduce(ReduceSpec {
                func,
                dtype,
                shape,
                axes,
                keepdim: r.b(),
                index_dtype,
                accumulate,
            })
        }
        1 => OpSpec::Softmax(SoftmaxSpec {
            dtype: r.fl(),
            shape: r.shape(rank),
            axis: r.n(rank as u64) as usize,
            log: r.b(),
        }),
        2 => OpSpec::SoftmaxBackward(SoftmaxBackwardSpec {
            dtype: r.fl(),
            shape: r.shape(rank),
            axis: r.n(rank as u64) as usize,
            log: r.b(),
        }),
        3 => OpSpec::CrossEntropy(CrossEntropySpec {
            dtype: r.fl(),
            index_dtype: [U32, I32, F32][r.n(3) as usize],
            batch: r.dim(),
            classes: r.dim(),
            divide_by_batch: r.b(),
            grad: r.b(),
            probs: r.b(),
        }),
        4 => OpSpec::LayerNorm(LayerNormSpec {
            dtype: r.fl(),
            shape: r.shape(rank),
            eps: 1e-5,
            rms: r.b(),
            weight: r.b(),
            bias: r.b(),
            residual: r.b(),
            save_stats: r.b(),
        }),
        5 => {
            let (weight, bias) = (r.b(), r.b());
            OpSpec::LayerNormBackward(LayerNormBackwardSpec {
                dtype: r.fl(),
                shape: r.shape(rank),
                rms: r.b(),
                weight,
                bias,
                param_grads: (weight || bias) && r.b(),
            })
        }
        6 => OpSpec::BatchNorm(BatchNormSpec {
            dtype: r.fl(),
            shape: r.shape(rank.max(2)),
            eps: 1e-5,
            momentum: 0.3,
            training: r.b(),
        }),
        _ => OpSpec::BatchNormBackward(BatchNormBackwardSpec {
            dtype: r.fl(),
            shape: r.shape(rank.max(2)),
            param_grads: r.b(),
        }),
    }
}

#[test]
fn fuzz() {
    let mut r = R(77);
    let execs = [
        (
            Interpreter::new("cpu", TargetCaps::cpu()),
            TargetCaps::cpu(),
        ),
        (
            Interpreter::new("gpu", TargetCaps::cuda_sm90()),
            TargetCaps::cuda_sm90(),
        ),
        (
            Interpreter::new("base", TargetCaps::gpu_baseline()),
            TargetCaps::gpu_baseline(),
        ),
    ];
    let mut fails = Vec::new();
    let mut n = 0;
    for i in 0..400 {
        let s = spec(&mut r);
        if s.validate().is_err() {
            continue;
        }
        for (e, caps) in &execs {
            let ok = s
                .inputs()
                .iter()
                .chain(s.outputs().iter())
                .all(|t| caps.supports(t.dtype));
            if !ok {
                continue;
            }
            n += 1;
            if let Err(f) = check(e, &s, i) {
                fails.push(format!(
                    "{} {}: {f}",
                    caps.invocations_1d(),
                    serde_json::to_string(&s).unwrap()
                ));
            }
        }
    }
    println!("{n} runs, {} failures", fails.len());
    for f in fails.iter().take(30) {
        println!("{f}");
    }
    assert!(fails.is_empty());
}
