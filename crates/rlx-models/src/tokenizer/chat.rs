//! Chat templates: `tokenizer.chat_template` is a Jinja template written for HF
//! transformers' `apply_chat_template`, so it is rendered the way transformers renders it:
//! `trim_blocks` and `lstrip_blocks` on, Python string methods available (`.strip()`,
//! `.startswith()` through minijinja-contrib's pycompat), `raise_exception(msg)` failing the
//! render, and `messages`, `add_generation_prompt`, `bos_token`, `eos_token` in scope.
use super::TokenizerError;
use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;

/// One chat turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `"system"`, `"user"`, `"assistant"` (templates may accept others, e.g. `"tool"`).
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Renders `template` for `messages`.
pub(crate) fn render(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String, TokenizerError> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    let tmpl = env
        .template_from_str(template)
        .map_err(|e| TokenizerError::Template(format!("parsing: {e:#}")))?;
    #[derive(Serialize)]
    struct Ctx<'a> {
        messages: &'a [Message],
        add_generation_prompt: bool,
        bos_token: &'a str,
        eos_token: &'a str,
    }
    tmpl.render(Ctx {
        messages,
        add_generation_prompt,
        bos_token,
        eos_token,
    })
    .map_err(|e| TokenizerError::Template(format!("rendering: {e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raise_exception_is_a_typed_error() {
        let t = "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}ok";
        let err = render(t, &[Message::new("assistant", "x")], false, "", "").unwrap_err();
        assert!(err.to_string().contains("first must be user"), "{err}");
        assert_eq!(
            render(t, &[Message::new("user", "x")], false, "", "").unwrap(),
            "ok"
        );
    }

    #[test]
    fn python_string_methods_and_trim_blocks() {
        // trim_blocks eats the newline after `%}`, lstrip_blocks the indent before `{%`.
        let t = "{% for m in messages %}\n  {% if m.role == 'user' %}{{ m.content.strip() }}{% endif %}|{% endfor %}";
        let out = render(t, &[Message::new("user", "  hi  ")], false, "", "").unwrap();
        assert_eq!(out, "hi|");
    }

    #[test]
    fn bad_template_is_an_error_not_a_panic() {
        assert!(render("{% for %}", &[], false, "", "").is_err());
    }
}
