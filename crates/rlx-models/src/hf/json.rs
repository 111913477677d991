//! Reading the small JSON files of a Hugging Face folder (`config.json`, `modules.json`,
//! sentence-transformers' module configs): typed getters whose errors name the file and the
//! key, so a bad field reads as "config.json: hidden_size: …" rather than a serde message.
use crate::ModelError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One parsed JSON file and where it came from.
#[derive(Clone, Debug)]
pub struct JsonFile {
    path: PathBuf,
    value: Value,
}

impl JsonFile {
    /// Read and parse `path`; a missing or malformed file is an error naming it.
    pub fn read(path: impl AsRef<Path>) -> Result<JsonFile, ModelError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::HfConfig {
            path: path.clone(),
            key: String::new(),
            reason: format!("cannot read: {e}"),
        })?;
        JsonFile::parse(path, &text)
    }

    /// Parse `text` as if read from `path` (tests build configs in memory).
    pub fn parse(path: impl Into<PathBuf>, text: &str) -> Result<JsonFile, ModelError> {
        let path = path.into();
        let value = serde_json::from_str(text).map_err(|e| ModelError::HfConfig {
            path: path.clone(),
            key: String::new(),
            reason: format!("not valid JSON: {e}"),
        })?;
        Ok(JsonFile { path, value })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn value(&self) -> &Value {
        &self.value
    }

    /// An error about `key` of this file.
    pub fn error(&self, key: &str, reason: impl Into<String>) -> ModelError {
        ModelError::HfConfig {
            path: self.path.clone(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// The field, or `None` when absent or JSON null (HF writes null for "unset").
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    /// A non-negative integer field that must be present.
    pub fn usize(&self, key: &str) -> Result<usize, ModelError> {
        let v = self.get(key).ok_or_else(|| self.error(key, "missing"))?;
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| self.error(key, format!("{v} is not a non-negative integer")))
    }

    /// A non-negative integer field, `default` when absent.
    pub fn usize_or(&self, key: &str, default: usize) -> Result<usize, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(_) => self.usize(key),
        }
    }

    /// A number field, `default` when absent.
    pub fn f64_or(&self, key: &str, default: f64) -> Result<f64, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| self.error(key, format!("{v} is not a number"))),
        }
    }

    /// A string field, `default` when absent.
    pub fn str_or<'a>(&'a self, key: &str, default: &'a str) -> Result<&'a str, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_str()
                .ok_or_else(|| self.error(key, format!("{v} is not a string"))),
        }
    }

    /// A boolean field, `default` when absent.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, ModelError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.error(key, format!("{v} is not true or false"))),
        }
    }
}

/// Read and parse `path` (the same as [`JsonFile::read`]).
pub fn read_json(path: &Path) -> Result<JsonFile, ModelError> {
    JsonFile::read(path)
}

/// The getters the decoder configs use: optional fields typed or refused.
impl JsonFile {
    /// The error for `key` not being `what`, with what was found.
    pub fn bad(&self, key: &str, what: &str) -> ModelError {
        let got = match self.value.get(key) {
            None => "absent".to_string(),
            Some(v) => format!("{v}"),
        };
        self.error(key, format!("must be {what} (found {got})"))
    }

    /// A required size: a positive integer no larger than [`crate::llm::MAX_DIM`].
    pub fn positive(&self, key: &str) -> Result<usize, ModelError> {
        match self.usize(key)? {
            n @ 1..=crate::llm::MAX_DIM => Ok(n),
            _ => Err(self.bad(key, "a positive integer up to 16M")),
        }
    }

    /// An optional size (see [`JsonFile::positive`]).
    pub fn opt_positive(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.positive(key).map(Some),
        }
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.usize(key).map(Some),
        }
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_f64().filter(|x| x.is_finite()) {
                Some(x) => Ok(Some(x)),
                None => Err(self.bad(key, "a finite number")),
            },
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.bool_or(key, false).map(Some),
        }
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.str_or(key, "").map(Some),
        }
    }
}
