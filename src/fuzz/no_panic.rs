//! Many inputs into one no-panic entry point ([`super::entry`]) on several threads:
//! arbitrary bytes, and valid inputs changed byte by byte, drawn from a seed. A panic
//! is caught and reported with its input; the run goes on. `kernelc fuzz --no-panic
//! ENTRY` runs it; `tests/no_panic.rs` draws its inputs with [`mutate`] too.

use super::entry;
use kernelc_ir::testing::{Case, GenConfig, Shape};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A no-panic entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    IrJson,
    OpSpecJson,
    GraphJson,
    RandomProgram,
}

impl Entry {
    pub const ALL: [Entry; 4] = [
        Entry::IrJson,
        Entry::OpSpecJson,
        Entry::GraphJson,
        Entry::RandomProgram,
    ];

    /// Its name, as the cargo-fuzz target and `--no-panic` call it.
    pub fn name(self) -> &'static str {
        match self {
            Entry::IrJson => "ir_json",
            Entry::OpSpecJson => "op_spec_json",
            Entry::GraphJson => "graph_json",
            Entry::RandomProgram => "random_program",
        }
    }

    pub fn from_name(name: &str) -> Option<Entry> {
        Entry::ALL.into_iter().find(|e| e.name() == name)
    }

    fn call(self, bytes: &[u8]) {
        match self {
            Entry::IrJson => entry::ir_json(bytes),
            Entry::OpSpecJson => entry::op_spec_json(bytes),
            Entry::GraphJson => entry::graph_json(bytes),
            Entry::RandomProgram => entry::random_program(bytes),
        }
    }
}

/// A valid graph (an add feeding a softmax) whose JSON the graph entry mutates.
pub const GRAPH_SEED: &str = r#"{
  "inputs": [
    {"name": "x", "dtype": "f32", "shape": [4, 8]},
    {"name": "b", "dtype": "f32", "shape": [8]}
  ],
  "nodes": [
    {"spec": {"op": "binary", "func": "add", "dtype": "f32", "lhs": [4, 8], "rhs": [8]},
     "inputs": [{"input": 0}, {"input": 1}]},
    {"spec": {"op": "softmax", "dtype": "f32", "shape": [4, 8], "axis": 1, "log": false},
     "inputs": [{"node": {"node": 0, "output": 0}}]}
  ],
  "outputs": [{"node": {"node": 1, "output": 0}}]
}"#;

/// One edit of [`mutate`]: where (any index, reduced modulo the length), a byte, how.
pub type Edit = (usize, u8, u8);

/// `bytes` with `edits` applied: a byte replaced, inserted or removed, or a JSON
/// punctuation mark or digit swapped in (which reaches deeper than noise).
pub fn mutate(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    const PUNCTUATION: &[u8] = b"{}[]\":,-.0123456789e";
    for &(at, byte, how) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = at % bytes.len();
        match how % 4 {
            0 => bytes[i] = byte,
            1 => bytes.insert(i, byte),
            2 => {
                bytes.remove(i);
            }
            _ => bytes[i] = PUNCTUATION[byte as usize % PUNCTUATION.len()],
        }
    }
    bytes
}

/// A random kernel's IR JSON (the generator's choice stream is `words`).
pub fn ir_seed(words: &[u32]) -> Vec<u8> {
    let split = words.len() / 2;
    let case = Case::from_words(
        &GenConfig::full(),
        Shape::Statements,
        &words[..split],
        &words[split..],
    );
    kernelc_ir::json::to_json(&case.kernel).into_bytes()
}

/// Every conformance case of every op kind, as JSON.
pub fn spec_seeds() -> Vec<Vec<u8>> {
    kernelc_kernels::spec::OpKind::ALL
        .iter()
        .flat_map(|k| k.cases())
        .filter_map(|s| serde_json::to_vec(&s).ok())
        .collect()
}

/// A splitmix64 stream.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// `n` words of the splitmix64 stream from `seed` (the high half of each step):
/// random choices that a seed reproduces.
pub fn words(seed: u64, n: usize) -> Vec<u32> {
    let mut w = Words(seed);
    (0..n).map(|_| (w.next() >> 32) as u32).collect()
}

/// Input `index` of the run from `seed` (`specs`: [`spec_seeds`]): a quarter arbitrary bytes, the rest a valid
/// input of the entry changed by one to five edits (random programs: bytes only, all
/// of which the generator reads).
pub fn input(entry: Entry, specs: &[Vec<u8>], seed: u64, index: u64) -> Vec<u8> {
    let mut w = Words(seed ^ index.wrapping_mul(0xD134_2543_DE82_EF95));
    if entry == Entry::RandomProgram {
        let n = w.below(2400) as usize;
        return w.bytes(n);
    }
    if w.below(4) == 0 {
        let n = w.below(256) as usize;
        return w.bytes(n);
    }
    let valid = match entry {
        Entry::IrJson => {
            let words: Vec<u32> = (0..2 + w.below(300)).map(|_| w.next() as u32).collect();
            ir_seed(&words)
        }
        Entry::OpSpecJson => specs[w.below(specs.len() as u64) as usize].clone(),
        Entry::GraphJson | Entry::RandomProgram => GRAPH_SEED.as_bytes().to_vec(),
    };
    let edits: Vec<Edit> = (0..1 + w.below(5))
        .map(|_| (w.next() as usize, w.next() as u8, w.next() as u8))
        .collect();
    mutate(valid, &edits)
}

/// A panic found: the input (hex) and the panic's message.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Panic {
    pub index: u64,
    pub input_hex: String,
    pub message: String,
}

/// What a run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NoPanicReport {
    pub entry: String,
    pub seed: u64,
    pub inputs: u64,
    /// At most the first 16 panics.
    pub panics: Vec<Panic>,
    pub panic_count: u64,
}

/// Feeds `inputs` inputs from `seed` to `entry` on `threads` threads; `tick(done)`
/// now and then. The process's panic hook is silenced for the run (a caught panic is
/// reported in the result, not on standard error) and restored after.
pub fn run(
    entry: Entry,
    inputs: u64,
    seed: u64,
    threads: usize,
    tick: impl Fn(u64) + Sync,
) -> NoPanicReport {
    let specs = spec_seeds();
    let done = AtomicU64::new(0);
    let panics = Mutex::new(Vec::new());
    let count = AtomicU64::new(0);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let threads = threads.max(1) as u64;
    let trace = std::env::var_os("KERNELC_FUZZ_TRACE").is_some();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (specs, done, panics, count, tick) = (&specs, &done, &panics, &count, &tick);
            s.spawn(move || {
                let mut index = t;
                while index < inputs {
                    let bytes = input(entry, specs, seed, index);
                    if trace {
                        // A crash no panic hook sees (an abort in LLVM): the last index
                        // printed is the input that caused it.
                        eprintln!("input {index}");
                    }
                    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| entry.call(&bytes))) {
                        count.fetch_add(1, Ordering::Relaxed);
                        let message = payload
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "a panic without a message".into());
                        if let Ok(mut found) = panics.lock() {
                            if found.len() < 16 {
                                found.push(Panic {
                                    index,
                                    input_hex: bytes.iter().map(|b| format!("{b:02x}")).collect(),
                                    message,
                                });
                            }
                        }
                    }
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if n % 256 == 0 {
                        tick(n);
                    }
                    index += threads;
                }
            });
        }
    });
    std::panic::set_hook(hook);
    NoPanicReport {
        entry: entry.name().to_string(),
        seed,
        inputs: done.into_inner(),
        panics: panics.into_inner().unwrap_or_default(),
        panic_count: count.into_inner(),
    }
}
