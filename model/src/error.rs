//! The model's errors: what can be wrong with a matcher a user wrote.

/// A matcher that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The regex of an `=~` or `!~` matcher does not compile (Go RE2 syntax).
    #[error("invalid regex {value:?} for label {name:?}")]
    InvalidRegex {
        name: String,
        value: String,
        #[source]
        source: regex::Error,
    },
}

impl Error {
    /// The message with its causes, `": "`-separated (the regex parser's reason last).
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(s) = src {
            out.push_str(": ");
            out.push_str(&s.to_string());
            src = s.source();
        }
        out
    }
}
