//! `repro propose openai`: a proposer that asks a language model through an
//! OpenAI-compatible chat-completions endpoint. The endpoint comes from the environment:
//! `REPRO_PROPOSER_URL` (the API base, e.g. `https://api.openai.com/v1`, or the full
//! `…/chat/completions` URL), `REPRO_PROPOSER_MODEL` and, when the endpoint wants one,
//! `REPRO_PROPOSER_KEY` (sent as a bearer token, never printed: every message this module
//! makes has it replaced by `***`).
//!
//! The model gets the rules and the answer's schema as the system message and the brief
//! as the user message; its reply's JSON object (bare, or in a ```json fence) is printed
//! as the answer. Its candidates are passed on as they are: repro reads each alone, so a
//! malformed one fails alone.

use super::answer::Answer;
use super::brief::Brief;
use super::{redact, KEY_ENV, MODEL_ENV, URL_ENV};
use anyhow::{bail, Context};
use std::time::Duration;

/// How long one request may take (the tune's `proposer.timeout` stops it sooner).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The endpoint, from the environment.
pub struct Endpoint {
    /// The chat-completions URL.
    pub url: String,
    pub model: String,
    pub key: Option<String>,
}

impl Endpoint {
    /// Whether the environment names an endpoint at all (any of the three variables set):
    /// then [`Endpoint::from_env`] is asked, and says what is missing.
    pub fn configured() -> bool {
        [URL_ENV, MODEL_ENV, KEY_ENV]
            .iter()
            .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()))
    }

    pub fn from_env() -> anyhow::Result<Endpoint> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let Some(base) = var(URL_ENV) else {
            bail!("${URL_ENV} is not set: export the endpoint's base URL, e.g. {URL_ENV}=https://api.openai.com/v1")
        };
        let Some(model) = var(MODEL_ENV) else {
            bail!("${MODEL_ENV} is not set: export the model's name, e.g. {MODEL_ENV}=gpt-4.1")
        };
        Ok(Endpoint {
            url: chat_url(&base),
            model,
            key: var(KEY_ENV),
        })
    }

    fn secrets(&self) -> Vec<(String, String)> {
        self.key
            .iter()
            .map(|k| (KEY_ENV.to_string(), k.clone()))
            .collect()
    }
}

/// The chat-completions URL of an API base (left alone when it is one already).
pub fn chat_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/chat/completions")
    }
}

/// Ask the model for candidates for `brief`.
pub fn propose(brief: &Brief, endpoint: &Endpoint) -> anyhow::Result<Answer> {
    let secrets = endpoint.secrets();
    ask(brief, endpoint).map_err(|e| anyhow::anyhow!(redact(&format!("{e:#}"), &secrets)))
}

fn ask(brief: &Brief, endpoint: &Endpoint) -> anyhow::Result<Answer> {
    let body = serde_json::json!({
        "model": endpoint.model,
        "messages": [
            {"role": "system", "content": instructions(brief)},
            {"role": "user", "content": serde_json::to_string_pretty(brief)?},
        ],
    });
    let loopback = ["://127.", "://localhost", "://[::1]"]
        .iter()
        .any(|h| endpoint.url.contains(h));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        // A proxy cannot reach this machine's loopback.
        .proxy(if loopback {
            None
        } else {
            ureq::Proxy::try_from_env()
        })
        .build()
        .into();
    let mut request = agent
        .post(&endpoint.url)
        .header("Content-Type", "application/json");
    if let Some(key) = &endpoint.key {
        request = request.header("Authorization", &format!("Bearer {key}"));
    }
    let mut response = request
        .send(serde_json::to_vec(&body)?)
        .with_context(|| format!("POST {} failed", endpoint.url))?;
    let status = response.status();
    let text = response
        .body_mut()
        .read_to_string()
        .with_context(|| format!("cannot read the answer of {}", endpoint.url))?;
    if !status.is_success() {
        let shown: String = text.chars().take(300).collect();
        bail!("{} answered {status}: {shown}", endpoint.url);
    }
    let reply: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} did not answer with JSON", endpoint.url))?;
    let content = reply
        .pointer("/choices/0/message/content")
        .and_then(|c| c.as_str())
        .with_context(|| {
            format!(
                "{} answered without choices[0].message.content",
                endpoint.url
            )
        })?;
    answer_in(content).map_err(|e| anyhow::anyhow!("the model's reply is unusable: {e}"))
}

/// The answer in a model's reply: the whole reply, a ```json fence, or the outermost
/// `{ … }`.
pub fn answer_in(content: &str) -> Result<Answer, String> {
    if let Ok(a) = serde_json::from_str::<Answer>(content.trim()) {
        return Ok(a);
    }
    let fenced = content
        .split("```")
        .skip(1)
        .step_by(2)
        .map(|block| block.trim_start_matches("json").trim());
    let braces = content
        .find('{')
        .zip(content.rfind('}'))
        .filter(|(a, b)| a < b)
        .map(|(a, b)| &content[a..=b]);
    fenced
        .chain(braces)
        .find_map(|t| serde_json::from_str::<Answer>(t).ok())
        .ok_or_else(|| {
            let shown: String = content.trim().chars().take(200).collect();
            format!("no {{\"candidates\": [...]}} object in it: `{shown}`")
        })
}

/// The system message: the task, the rules and the answer's schema.
fn instructions(brief: &Brief) -> String {
    format!(
        r#"You improve a CUDA kernel's source. The user message is a JSON brief from the autotuner `repro`: the kernel (`kernel.source` is its whole file `{path}`, entry `{entry}`), the define space the tuner also searches, the best trials so far (`elite`, each with its configuration, p50 per shape, registers, its lineage and its source's diff against the kernel's own), the recent failures with the compiler's or the gate's reason, and every earlier proposal.

Objective: {objective}.

Propose at most {max} new versions of the source that are faster and still correct. Keep the entry's name and signature, the launch-geometry globals and the defines' meaning; do not add host code. Learn from the failures; do not repeat a proposal.

Answer with one JSON object and nothing else:
{{"candidates": [{{"patch": "<unified diff against the parent's source, naming a/{path} and b/{path}>", "parent": <trial number whose source and configuration to start from; default the best trial>, "config": {{"<DEFINE>": <value>}} (optional: defines to change, within the space), "note": "<one line: what the change does>"}}]}}
Instead of "patch" you may give "source": "<the whole new file>"."#,
        path = brief.kernel.path,
        entry = brief.kernel.entry,
        objective = brief.objective,
        max = brief.max_candidates,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_replies_are_read_leniently() {
        assert_eq!(chat_url("http://h/v1/"), "http://h/v1/chat/completions");
        assert_eq!(
            chat_url("http://h/v1/chat/completions"),
            "http://h/v1/chat/completions"
        );
        let bare = r#"{"candidates": [{"source": "x"}]}"#;
        assert_eq!(answer_in(bare).unwrap().candidates.len(), 1);
        let fenced = "Here you go:\n```json\n{\"candidates\": []}\n```\nGood luck.";
        assert!(answer_in(fenced).unwrap().candidates.is_empty());
        let chatty = "I think {\"candidates\": [{\"patch\": \"p\"}, {\"bad\": 1}]} works";
        assert_eq!(answer_in(chatty).unwrap().candidates.len(), 2);
        let e = answer_in("I cannot help with that.").unwrap_err();
        assert!(e.contains("`I cannot help with that.`"), "{e}");
    }
}
