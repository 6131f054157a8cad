//! Building one `naga::Function` with the emit bookkeeping naga requires.
//!
//! naga evaluates a non-constant expression where a `Statement::Emit` covering it
//! stands, and every such expression must be covered exactly once before it is used.
//! [`FnBuilder`] keeps that invariant by construction: expressions are appended to the
//! arena in evaluation order, the run of expressions appended since the last
//! statement is *pending*, and it is emitted (one contiguous `Emit` range) into the
//! current block just before the next statement is pushed, a nested block is opened or
//! closed, or a pre-emitted expression (literal, variable, argument) interrupts it.
//! So an expression is always emitted in the block where it was created, before any
//! statement that could use it.

use naga::{Block, Expression, Function, Handle, LocalVariable, Span, Statement, Type};

/// One function under construction; see the module documentation.
pub(super) struct FnBuilder {
    func: Function,
    /// The blocks being filled, innermost last (the function body is the first).
    blocks: Vec<Block>,
    /// The first expression of the pending (not yet emitted) run, if any.
    pending: Option<Handle<Expression>>,
    /// The expression appended last (the end of the pending run).
    last: Option<Handle<Expression>>,
}

impl FnBuilder {
    pub(super) fn new(name: &str) -> FnBuilder {
        FnBuilder {
            func: Function {
                name: Some(name.to_string()),
                ..Function::default()
            },
            blocks: vec![Block::new()],
            pending: None,
            last: None,
        }
    }

    /// The function's argument list and result (set before [`FnBuilder::finish`]).
    pub(super) fn signature_mut(
        &mut self,
    ) -> (
        &mut Vec<naga::FunctionArgument>,
        &mut Option<naga::FunctionResult>,
    ) {
        (&mut self.func.arguments, &mut self.func.result)
    }

    /// Appends an expression; non-constant ones join the pending emit run.
    pub(super) fn expr(&mut self, e: Expression) -> Handle<Expression> {
        if e.needs_pre_emit() {
            // Literals, variables and arguments are "emitted at the start of the
            // function" and must not sit inside an `Emit` range: close the run first.
            self.flush();
            return self.append(e);
        }
        let h = self.append(e);
        if self.pending.is_none() {
            self.pending = Some(h);
        }
        h
    }

    fn append(&mut self, e: Expression) -> Handle<Expression> {
        let h = self.func.expressions.append(e, Span::UNDEFINED);
        self.last = Some(h);
        h
    }

    /// Emits the pending run into the current block.
    fn flush(&mut self) {
        let Some(first) = self.pending.take() else {
            return;
        };
        let Some(last) = self.last else {
            return;
        };
        let range = naga::Range::new_from_bounds(first, last);
        self.current().push(Statement::Emit(range), Span::UNDEFINED);
    }

    fn current(&mut self) -> &mut Block {
        if self.blocks.is_empty() {
            // Never happens: `close` refuses to pop the function body. Keeping a
            // block here makes the method total.
            self.blocks.push(Block::new());
        }
        let last = self.blocks.len() - 1;
        &mut self.blocks[last]
    }

    /// Pushes a statement into the current block (after emitting what is pending).
    pub(super) fn stmt(&mut self, s: Statement) {
        self.flush();
        self.current().push(s, Span::UNDEFINED);
    }

    /// Starts a nested block (the body of an `if`, a loop, ...).
    pub(super) fn open(&mut self) {
        self.flush();
        self.blocks.push(Block::new());
    }

    /// Ends the innermost nested block and returns it. `None` if only the function
    /// body is open (an unbalanced `close`, a bug of the caller).
    pub(super) fn close(&mut self) -> Option<Block> {
        self.flush();
        if self.blocks.len() <= 1 {
            return None;
        }
        self.blocks.pop()
    }

    /// Declares a function-local variable (zero-initialised, as WGSL's `var`).
    pub(super) fn local(&mut self, name: &str, ty: Handle<Type>) -> Handle<Expression> {
        let var = self.func.local_variables.append(
            LocalVariable {
                name: Some(name.to_string()),
                ty,
                init: None,
            },
            Span::UNDEFINED,
        );
        self.expr(Expression::LocalVariable(var))
    }

    /// The finished function. `None` if nested blocks are still open.
    pub(super) fn finish(mut self) -> Option<Function> {
        self.flush();
        if self.blocks.len() != 1 {
            return None;
        }
        self.func.body = self.blocks.pop()?;
        Some(self.func)
    }
}
