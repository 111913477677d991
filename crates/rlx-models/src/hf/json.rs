//! Reading a folder's JSON configs with errors that name the file and the key, so a folder
//! of the wrong kind of model says what it lacks instead of failing somewhere later.
use crate::ModelError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A parsed JSON file and where it came from.
#[derive(Clone, Debug)]
pub struct HfJson {
    pub path: PathBuf,
    pub value: Value,
}

/// Parse `path` as JSON.
pub fn read_json(path: &Path) -> Result<HfJson, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::HfConfig {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let value = serde_json::from_str(&text).map_err(|e| ModelError::HfConfig {
        path: path.to_path_buf(),
        reason: format!("not valid JSON: {e}"),
    })?;
    Ok(HfJson {
        path: path.to_path_buf(),
        value,
    })
}

impl HfJson {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    /// The error for `key` not being `what`.
    pub fn bad(&self, key: &str, what: &str) -> ModelError {
        let got = match self.value.get(key) {
            None => "absent".to_string(),
            Some(v) => format!("{v}"),
        };
        ModelError::HfConfig {
            path: self.path.clone(),
            reason: format!("\"{key}\" must be {what} (found {got})"),
        }
    }

    /// A required non-negative integer.
    pub fn usize(&self, key: &str) -> Result<usize, ModelError> {
        self.opt_usize(key)?
            .ok_or_else(|| self.bad(key, "a non-negative integer"))
    }

    /// A required positive integer.
    pub fn positive(&self, key: &str) -> Result<usize, ModelError> {
        match self.usize(key)? {
            0 => Err(self.bad(key, "a positive integer")),
            n => Ok(n),
        }
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => Ok(Some(n)),
                None => Err(self.bad(key, "a non-negative integer")),
            },
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
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.bad(key, "true or false")),
        }
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.bad(key, "a string")),
        }
    }

    /// Token ids given as one integer or a list (`eos_token_id`).
    pub fn ids(&self, key: &str) -> Result<Vec<u32>, ModelError> {
        let one = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| one(v).ok_or_else(|| self.bad(key, "token ids")))
                .collect(),
            Some(v) => one(v)
                .map(|i| vec![i])
                .ok_or_else(|| self.bad(key, "a token id or a list of them")),
        }
    }
}
