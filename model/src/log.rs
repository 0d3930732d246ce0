//! What a step did, in words, for counterexample traces. The checker runs every step with
//! a quiet log; a trace replays its steps with a verbose one.

/// Notes collected while a step runs.
#[derive(Debug, Default)]
pub(crate) struct Log {
    lines: Option<Vec<String>>,
}

impl Log {
    /// A log that records nothing (and formats nothing).
    pub(crate) fn quiet() -> Self {
        Self { lines: None }
    }

    /// A log that records every note.
    pub(crate) fn verbose() -> Self {
        Self {
            lines: Some(Vec::new()),
        }
    }

    /// Records a note, formatted only when the log is verbose.
    pub(crate) fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(lines) = &mut self.lines {
            lines.push(line());
        }
    }

    /// The notes, in order.
    pub(crate) fn lines(self) -> Vec<String> {
        self.lines.unwrap_or_default()
    }
}
