//! Chat templates: `tokenizer.chat_template` is a Jinja template written for HF
//! transformers' `apply_chat_template`, so it is rendered the way transformers renders it:
//! `trim_blocks` and `lstrip_blocks` on, Python string methods available (`.strip()`,
//! `.startswith()` through minijinja-contrib's pycompat), `raise_exception(msg)` failing the
//! render, `strftime_now(fmt)` (today in UTC; Llama 3.x templates print it), and `messages`,
//! `add_generation_prompt`, `bos_token`, `eos_token` in scope.
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
    env.add_function("strftime_now", |fmt: String| strftime_now(&fmt));
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

/// Today (UTC) in a strftime format: %d %m %Y %y %b %B %j %% (what chat templates use).
fn strftime_now(fmt: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_date((secs / 86_400) as i64, fmt)
}

/// Formats the day `days` after 1970-01-01 (Howard Hinnant's civil-from-days).
fn format_date(days: i64, fmt: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = cum[(month - 1) as usize] + day + i64::from(leap && month > 2);
    let name = MONTHS[(month - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('b') => out.push_str(&name[..3]),
            Some('B') => out.push_str(name),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
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
    fn dates_format_as_strftime() {
        assert_eq!(format_date(0, "%d %b %Y"), "01 Jan 1970");
        // 2024-07-26, the date_string Llama 3.1's template falls back to.
        assert_eq!(
            format_date(19_930, "%d %B %Y, day %j, %m/%y %%"),
            "26 July 2024, day 208, 07/24 %"
        );
        assert_eq!(format_date(19_782, "%Y-%m-%d"), "2024-02-29");
        let t = "{{ strftime_now('%Y') }}";
        assert_eq!(render(t, &[], false, "", "").unwrap().len(), 4);
    }

    #[test]
    fn bad_template_is_an_error_not_a_panic() {
        assert!(render("{% for %}", &[], false, "", "").is_err());
    }
}
