//! The text printer: a stable, readable rendering of a kernel (`kernelc ir ...`).
//!
//! ```text
//! kernel vec_add workgroup(64, 1, 1) {
//!   param a: buffer<f32, 1000> read
//!   param scale: f32
//!   shared tile: array<f32, 256>
//!   let i: u32 = global_id.x
//!   if i < 1000u {
//!     c[i] = a[i] + scale * b[i]
//!   }
//!   var acc: f32 = 0.0f
//!   for k: u32 in 0u..8u step 2 {
//!     acc = fma(tile[k], tile[k + 1u], acc)
//!   }
//!   barrier
//!   return
//! }
//! ```
//!
//! Matrix fragments print as declarations and four statements:
//!
//! ```text
//! kernel mma workgroup(32, 1, 1) {
//!   fragment acc: accumulator<f32, m16n8k16>
//!   fill acc = 0.0f
//!   load a = sa[w * 256u; stride 16u, row_major]
//!   mma acc = a * b + acc
//!   store c[0u; stride 8u, row_major] = acc
//! }
//! ```
//!
//! * `let x: T = e` gives an immutable local its value, `var x: T = e` a mutable one;
//!   `x = e` assigns. `for` prints its counter's type and omits `step 1`.
//! * Literals carry a type suffix ([`Scalar`]'s `Display`). Expressions are
//!   parenthesised only where precedence requires it (Rust's precedence: `* / %`,
//!   then `+ -`, `<< >>`, `&`, `^`, `|`, comparisons; comparisons do not chain).
//! * Loads are `a[i]`, or `a[i; 4]` for a 4-lane load; a store of a vector value prints
//!   its lane count the same way. Lanes are `v.lane1`.
//! * Names that are not identifiers are quoted (`"my name"`). A local whose name is
//!   shared with another local or a parameter or shared array prints as `name#id`.
//!
//! The printer is total: it prints invalid kernels too (unknown ids print as
//! `local#3`, `param#1`, `shared#0`), so error messages can show what was rejected.
//! The output depends only on the kernel, so it is deterministic.

use crate::fragment::{FragmentId, FragmentOp, MmaShape};
use crate::kernel::*;
use crate::scalar::Scalar;
use crate::validate::type_of;
use std::collections::HashMap;
use std::fmt::{self, Write as _};

/// The kernel as text (ends with a newline).
pub fn print(kernel: &Kernel) -> String {
    let mut p = Printer::new(kernel);
    p.kernel();
    p.out
}

/// One expression as text, in the context of `kernel` (for names).
pub fn print_expr(kernel: &Kernel, expr: &Expr) -> String {
    let p = Printer::new(kernel);
    let mut out = String::new();
    p.expr(&mut out, expr, Prec::Lowest);
    out
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

/// Binding strength, loosest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Lowest,
    Cmp,
    Or,
    Xor,
    And,
    Shift,
    Add,
    Mul,
    Unary,
    /// Literals, names, calls, loads, lane extraction.
    Atom,
}

fn binary_prec(op: BinaryOp) -> Prec {
    match op {
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => Prec::Mul,
        BinaryOp::Add | BinaryOp::Sub => Prec::Add,
        BinaryOp::Shl | BinaryOp::Shr => Prec::Shift,
        BinaryOp::And => Prec::And,
        BinaryOp::Xor => Prec::Xor,
        BinaryOp::Or => Prec::Or,
    }
}

fn is_ident(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A declared name as printed: as is when it is an identifier, quoted otherwise.
fn name_text(name: &str) -> String {
    if is_ident(name) {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

fn axis_text(axis: u8) -> String {
    match axis {
        0 => "x".to_string(),
        1 => "y".to_string(),
        2 => "z".to_string(),
        other => format!("axis{other}"),
    }
}

struct Printer<'k> {
    kernel: &'k Kernel,
    /// Printed name of each local, by index.
    local_names: Vec<String>,
    out: String,
    indent: usize,
}

impl<'k> Printer<'k> {
    fn new(kernel: &'k Kernel) -> Self {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for l in &kernel.locals {
            *counts.entry(l.name.as_str()).or_default() += 1;
        }
        for p in &kernel.params {
            *counts.entry(p.name()).or_default() += 1;
        }
        for s in &kernel.shared {
            *counts.entry(s.name.as_str()).or_default() += 1;
        }
        let local_names = kernel
            .locals
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let base = name_text(&l.name);
                if counts.get(l.name.as_str()).copied().unwrap_or(0) > 1 {
                    format!("{base}#{i}")
                } else {
                    base
                }
            })
            .collect();
        Printer {
            kernel,
            local_names,
            out: String::new(),
            indent: 0,
        }
    }

    fn local(&self, id: LocalId) -> String {
        self.local_names
            .get(id.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("local#{}", id.0))
    }

    fn local_ty(&self, id: LocalId) -> String {
        self.kernel
            .local(id)
            .map_or_else(|| "?".to_string(), |l| l.ty.to_string())
    }

    fn memory(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(p) => self
                .kernel
                .param(p)
                .map_or_else(|| format!("param#{}", p.0), |p| name_text(p.name())),
            Memory::Shared(s) => self
                .kernel
                .shared_decl(s)
                .map_or_else(|| format!("shared#{}", s.0), |d| name_text(&d.name)),
        }
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn kernel(&mut self) {
        let k = self.kernel;
        let [x, y, z] = k.workgroup_size;
        self.line(&format!(
            "kernel {} workgroup({x}, {y}, {z}) {{",
            name_text(&k.name)
        ));
        self.indent += 1;
        for p in &k.params {
            let text = match p {
                Param::Buffer {
                    name,
                    elem,
                    len,
                    access,
                } => format!(
                    "param {}: buffer<{elem}, {len}> {}",
                    name_text(name),
                    access.name()
                ),
                Param::Scalar { name, ty } => format!("param {}: {ty}", name_text(name)),
            };
            self.line(&text);
        }
        for s in &k.shared {
            self.line(&format!(
                "shared {}: array<{}, {}>",
                name_text(&s.name),
                s.elem,
                s.len
            ));
        }
        for f in &k.fragments {
            let MmaShape { m, n, k } = f.shape;
            self.line(&format!(
                "fragment {}: {}<{}, m{m}n{n}k{k}>{}",
                name_text(&f.name),
                f.role.name(),
                f.elem,
                if f.in_registers { " in registers" } else { "" }
            ));
        }
        self.block(&k.body);
        self.indent -= 1;
        self.line("}");
    }

    fn fragment_text(&self, id: FragmentId) -> String {
        self.kernel
            .fragment(id)
            .map_or_else(|| format!("fragment#{}", id.0), |f| name_text(&f.name))
    }

    fn fragment_op(&mut self, op: &FragmentOp) {
        let list = |p: &Self, ids: &[FragmentId]| {
            ids.iter()
                .map(|f| p.fragment_text(*f))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = match op {
            FragmentOp::Map(m) => {
                let args: Vec<String> = m
                    .args
                    .iter()
                    .map(|a| format!("{} = {}", self.local(a.local), self.fragment_text(a.frag)))
                    .collect();
                let head = format!(
                    "map {}[{}, {}]({}) {{",
                    self.fragment_text(m.dst),
                    self.local(m.row),
                    self.local(m.col),
                    args.join(", ")
                );
                self.line(&head);
                self.indent += 1;
                self.block(&m.body);
                let value = self.expr_text(&m.value);
                self.line(&value);
                self.indent -= 1;
                self.line("}");
                return;
            }
            FragmentOp::ReduceRows {
                dst,
                srcs,
                reduction,
            } => format!(
                "reduce_rows {} = {}({})",
                self.fragment_text(*dst),
                reduction.name(),
                list(self, srcs)
            ),
            FragmentOp::Convert { dst, srcs, first } => format!(
                "convert {} = {}{}",
                self.fragment_text(*dst),
                list(self, srcs),
                if *first == 0 {
                    String::new()
                } else {
                    format!(" from column {first}")
                }
            ),
            FragmentOp::Fill { frag, value } => {
                format!(
                    "fill {} = {}",
                    self.fragment_text(*frag),
                    self.expr_text(value)
                )
            }
            FragmentOp::Load {
                frag,
                mem,
                index,
                stride,
                layout,
            } => format!(
                "load {} = {}[{}; stride {}, {}]",
                self.fragment_text(*frag),
                self.memory(*mem),
                self.expr_text(index),
                self.expr_text(stride),
                layout.name()
            ),
            FragmentOp::Store {
                frag,
                mem,
                index,
                stride,
                layout,
            } => format!(
                "store {}[{}; stride {}, {}] = {}",
                self.memory(*mem),
                self.expr_text(index),
                self.expr_text(stride),
                layout.name(),
                self.fragment_text(*frag)
            ),
            FragmentOp::Mma { d, a, b, c } => format!(
                "mma {} = {} * {} + {}",
                self.fragment_text(*d),
                self.fragment_text(*a),
                self.fragment_text(*b),
                self.fragment_text(*c)
            ),
        };
        self.line(&text);
    }

    fn block(&mut self, block: &[Stmt]) {
        for s in block {
            self.stmt(s);
        }
    }

    fn expr_text(&self, e: &Expr) -> String {
        let mut s = String::new();
        self.expr(&mut s, e, Prec::Lowest);
        s
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let { local, value } => {
                let mutable = self.kernel.local(*local).is_some_and(|l| l.mutable);
                let text = format!(
                    "{} {}: {} = {}",
                    if mutable { "var" } else { "let" },
                    self.local(*local),
                    self.local_ty(*local),
                    self.expr_text(value)
                );
                self.line(&text);
            }
            Stmt::Assign { local, value } => {
                let text = format!("{} = {}", self.local(*local), self.expr_text(value));
                self.line(&text);
            }
            Stmt::Store { mem, index, value } => {
                let lanes = type_of(self.kernel, value).map_or(1, |t| t.lanes);
                let lanes = if lanes > 1 {
                    format!("; {lanes}")
                } else {
                    String::new()
                };
                let text = format!(
                    "{}[{}{lanes}] = {}",
                    self.memory(*mem),
                    self.expr_text(index),
                    self.expr_text(value)
                );
                self.line(&text);
            }
            Stmt::If { .. } => self.if_chain(s, "if"),
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
            } => {
                let step = if *step == 1 {
                    String::new()
                } else {
                    format!(" step {step}")
                };
                let range = format!("{}..{}", self.expr_text(start), self.expr_text(end));
                let text = format!(
                    "for {}: {} in {range}{step} {{",
                    self.local(*var),
                    self.local_ty(*var)
                );
                self.line(&text);
                self.indent += 1;
                self.block(body);
                self.indent -= 1;
                self.line("}");
            }
            Stmt::Return => self.line("return"),
            Stmt::Barrier => self.line("barrier"),
            Stmt::Fragment(op) => self.fragment_op(op),
            Stmt::AsyncCopy(op) => self.async_copy(op),
        }
    }

    /// `copy shared[i; 8] <- buffer[j] if valid`, `copy_commit`, `copy_wait 2`.
    fn async_copy(&mut self, op: &crate::AsyncCopyOp) {
        let text = match op {
            crate::AsyncCopyOp::Start(c) => {
                let (dst, src) = c.memories();
                format!(
                    "copy {}[{}; {}] <- {}[{}] if {}",
                    self.memory(dst),
                    self.expr_text(&c.dst_index),
                    c.len,
                    self.memory(src),
                    self.expr_text(&c.src_index),
                    self.expr_text(&c.valid)
                )
            }
            crate::AsyncCopyOp::Commit => "copy_commit".to_string(),
            crate::AsyncCopyOp::Wait { pending } => format!("copy_wait {pending}"),
        };
        self.line(&text);
    }

    /// `if c { .. } else if d { .. } else { .. }`; `keyword` is `if` or `} else if`.
    fn if_chain(&mut self, s: &Stmt, keyword: &str) {
        let Stmt::If {
            cond,
            then_body,
            else_body,
        } = s
        else {
            return;
        };
        let text = format!("{keyword} {} {{", self.expr_text(cond));
        self.line(&text);
        self.indent += 1;
        self.block(then_body);
        self.indent -= 1;
        match else_body.as_slice() {
            [] => self.line("}"),
            [nested @ Stmt::If { .. }] => self.if_chain(nested, "} else if"),
            _ => {
                self.line("} else {");
                self.indent += 1;
                self.block(else_body);
                self.indent -= 1;
                self.line("}");
            }
        }
    }

    /// Writes `e`, in parentheses if it binds looser than `min`.
    fn expr(&self, out: &mut String, e: &Expr, min: Prec) {
        let prec = self.prec(e);
        let paren = prec < min;
        if paren {
            out.push('(');
        }
        self.expr_inner(out, e);
        if paren {
            out.push(')');
        }
    }

    fn prec(&self, e: &Expr) -> Prec {
        match e {
            Expr::Lit(s) => {
                if lit_text(*s).starts_with('-') {
                    Prec::Unary
                } else {
                    Prec::Atom
                }
            }
            Expr::Unary { .. } => Prec::Unary,
            Expr::Binary { op, .. } => binary_prec(*op),
            Expr::Cmp { .. } => Prec::Cmp,
            _ => Prec::Atom,
        }
    }

    fn args(&self, out: &mut String, args: &[&Expr]) {
        out.push('(');
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.expr(out, a, Prec::Lowest);
        }
        out.push(')');
    }

    fn expr_inner(&self, out: &mut String, e: &Expr) {
        match e {
            Expr::Lit(s) => out.push_str(&lit_text(*s)),
            Expr::Local(id) => out.push_str(&self.local(*id)),
            Expr::Param(p) => match self.kernel.param(*p) {
                Some(param) => out.push_str(&name_text(param.name())),
                None => {
                    let _ = write!(out, "param#{}", p.0);
                }
            },
            Expr::Builtin { builtin, axis } => {
                let _ = write!(out, "{}.{}", builtin.name(), axis_text(*axis));
            }
            Expr::Load { mem, index, lanes } => {
                out.push_str(&self.memory(*mem));
                out.push('[');
                self.expr(out, index, Prec::Lowest);
                if *lanes != 1 {
                    let _ = write!(out, "; {lanes}");
                }
                out.push(']');
            }
            Expr::Unary { op, arg } => {
                out.push_str(match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Not => "!",
                });
                // `-(-x)`, never `--x`.
                self.expr(out, arg, Prec::Atom);
            }
            Expr::Binary { op, lhs, rhs } => {
                let p = binary_prec(*op);
                self.expr(out, lhs, p);
                let _ = write!(out, " {} ", op.symbol());
                // Left-associative: an equal-precedence right operand needs parentheses.
                self.expr(out, rhs, next(p));
            }
            Expr::Cmp { op, lhs, rhs } => {
                // Comparisons do not chain: both sides bind tighter.
                self.expr(out, lhs, next(Prec::Cmp));
                let _ = write!(out, " {} ", op.symbol());
                self.expr(out, rhs, next(Prec::Cmp));
            }
            Expr::Math { func, args } => {
                out.push_str(func.name());
                self.args(out, &args.iter().collect::<Vec<_>>());
            }
            Expr::Select {
                cond,
                on_true,
                on_false,
            } => {
                out.push_str("select");
                self.args(out, &[cond, on_true, on_false]);
            }
            Expr::Cast { to, arg } => {
                let _ = write!(out, "cast<{to}>");
                self.args(out, &[arg]);
            }
            Expr::Bitcast { to, arg } => {
                let _ = write!(out, "bitcast<{to}>");
                self.args(out, &[arg]);
            }
            Expr::Vector(items) => {
                let _ = write!(out, "vec{}", items.len());
                self.args(out, &items.iter().collect::<Vec<_>>());
            }
            Expr::Splat { lanes, arg } => {
                let _ = write!(out, "splat{lanes}");
                self.args(out, &[arg]);
            }
            Expr::Extract { arg, lane } => {
                self.expr(out, arg, Prec::Atom);
                let _ = write!(out, ".lane{lane}");
            }
        }
    }
}

fn next(p: Prec) -> Prec {
    match p {
        Prec::Lowest => Prec::Cmp,
        Prec::Cmp => Prec::Or,
        Prec::Or => Prec::Xor,
        Prec::Xor => Prec::And,
        Prec::And => Prec::Shift,
        Prec::Shift => Prec::Add,
        Prec::Add => Prec::Mul,
        Prec::Mul => Prec::Unary,
        Prec::Unary | Prec::Atom => Prec::Atom,
    }
}

fn lit_text(s: Scalar) -> String {
    s.to_string()
}
