//! `[[limits.rate]]` and a server's `max_concurrent` / `breaker`: their file schema and
//! validated form (the limiters themselves are in `crate::limits`).

use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;

use super::raw::{AtLeastOne, Timeout};

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    #[serde(default)]
    pub rate: Vec<RawRate>,
}

/// One `[[limits.rate]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRate {
    pub per: String,
    #[serde(rename = "match")]
    pub pattern: Option<String>,
    pub rate: String,
    pub burst: Option<AtLeastOne>,
}

/// A server's `breaker = { failures = 5, open_for = "30s" }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub failures: Option<u32>,
    pub open_for: Option<Timeout>,
}

/// What a rate limit counts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatePer {
    /// The HTTP token's name ("anonymous" without one), "local" over stdio.
    Principal,
    /// The `[profiles.NAME]` of the path; requests without a profile are not counted.
    Profile,
    /// The tool called (its name as clients see it): one bucket per tool.
    Tool,
}

impl RatePer {
    pub fn as_str(self) -> &'static str {
        match self {
            RatePer::Principal => "principal",
            RatePer::Profile => "profile",
            RatePer::Tool => "tool",
        }
    }
}

/// A validated `[[limits.rate]]`: `count` per `period`, up to `burst` at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateRule {
    pub per: RatePer,
    /// Which principals, profiles or tools it applies to (a glob); all when `None`.
    pub pattern: Option<String>,
    pub count: NonZeroU32,
    pub period: Duration,
    pub burst: NonZeroU32,
    /// As written (`"10/s"`), for errors and `gateway_status`.
    pub rate: String,
}

impl RateRule {
    /// The name of the limit in errors, events and `/metrics`: `tool:time__*`.
    pub fn label(&self) -> String {
        format!(
            "{}:{}",
            self.per.as_str(),
            self.pattern.as_deref().unwrap_or("*")
        )
    }
}

/// `[limits]`, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsConfig {
    pub rate: Vec<RateRule>,
}

/// A server's circuit breaker: open after `failures` failures in a row (0: never), for `open_for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    pub failures: u32,
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failures: 5,
            open_for: Duration::from_secs(30),
        }
    }
}

impl BreakerConfig {
    /// On by default for a remote server. A server the gateway runs gets one only when its
    /// `breaker` is written: its process is watched already (restarted with a backoff when
    /// it exits), and a slow tool on a live process is not an outage.
    pub fn from_raw(raw: Option<RawBreaker>, remote: bool) -> BreakerConfig {
        let default = BreakerConfig::default();
        let Some(raw) = raw else {
            return match remote {
                true => default,
                false => BreakerConfig {
                    failures: 0,
                    ..default
                },
            };
        };
        BreakerConfig {
            failures: raw.failures.unwrap_or(default.failures),
            open_for: raw.open_for.map_or(default.open_for, |t| t.0),
        }
    }
}

/// `"10/s"`, `"600/min"`, `"5/h"`, `"3/2s"`: a count and the period it is spread over.
pub fn parse_rate(text: &str) -> Result<(NonZeroU32, Duration), String> {
    let bad = || format!("rate \"{text}\" is not COUNT/PERIOD (e.g. \"10/s\", \"600/min\")");
    let (count, period) = text.split_once('/').ok_or_else(bad)?;
    let count: u32 = count.trim().parse().map_err(|_| bad())?;
    let count = NonZeroU32::new(count).ok_or_else(|| format!("rate \"{text}\" allows nothing"))?;
    let period = period.trim();
    let period = match period {
        "s" | "sec" | "second" => Duration::from_secs(1),
        "m" | "min" | "minute" => Duration::from_secs(60),
        "h" | "hour" => Duration::from_secs(3600),
        other => humantime::parse_duration(other).map_err(|_| bad())?,
    };
    if period.is_zero() {
        return Err(bad());
    }
    Ok((count, period))
}

/// Validates the rules; the errors say which rule (by its index) is wrong and why.
pub fn validate(raw: RawLimits) -> Result<LimitsConfig, Vec<(usize, String)>> {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for (i, rule) in raw.rate.into_iter().enumerate() {
        let per = match rule.per.as_str() {
            "principal" => RatePer::Principal,
            "profile" => RatePer::Profile,
            "tool" => RatePer::Tool,
            other => {
                errors.push((
                    i,
                    format!("per = \"{other}\" is not \"principal\", \"profile\" or \"tool\""),
                ));
                continue;
            }
        };
        if let Some(pattern) = &rule.pattern
            && let Err(e) = globset::Glob::new(pattern)
        {
            errors.push((i, format!("match = \"{pattern}\" is not a glob: {e}")));
            continue;
        }
        let (count, period) = match parse_rate(&rule.rate) {
            Ok(rate) => rate,
            Err(e) => {
                errors.push((i, e));
                continue;
            }
        };
        let burst = match rule.burst {
            Some(AtLeastOne(n)) => match u32::try_from(n).ok().and_then(NonZeroU32::new) {
                Some(n) => n,
                None => {
                    errors.push((i, format!("burst = {n} is too large")));
                    continue;
                }
            },
            None => count,
        };
        rules.push(RateRule {
            per,
            pattern: rule.pattern,
            count,
            period,
            burst,
            rate: rule.rate,
        });
    }
    match errors.is_empty() {
        true => Ok(LimitsConfig { rate: rules }),
        false => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::{RatePer, parse_rate};
    use crate::config::{ConfigError, from_toml_str};

    fn load(text: &str) -> Result<crate::config::Config, ConfigError> {
        from_toml_str(text, Path::new("g.toml"), Path::new("/"), &|_: &str| None)
    }

    #[test]
    fn limits_read_with_their_defaults_and_wrong_rules_are_told() {
        let text = "[servers.a]\ncommand = \"x\"\nmax_concurrent = 2\nbreaker = { failures = 3 }\n\n\
                    [servers.b]\ncommand = \"y\"\n\n[servers.c]\nurl = \"https://c.test/mcp\"\n\n\
                    [[limits.rate]]\nper = \"tool\"\nmatch = \"a__*\"\nrate = \"600/min\"\n";
        let config = load(text).unwrap();
        let (a, b) = (&config.servers["a"], &config.servers["b"]);
        assert_eq!(
            (a.max_concurrent, a.breaker.failures, a.breaker.open_for),
            (Some(2), 3, Duration::from_secs(30))
        );
        assert_eq!(
            (b.max_concurrent, b.breaker.failures),
            (None, 0),
            "off for a process by default"
        );
        assert_eq!(
            config.servers["c"].breaker.failures, 5,
            "on for a remote server"
        );
        let rule = &config.limits.rate[0];
        assert_eq!(
            (rule.per, rule.count.get(), rule.burst.get()),
            (RatePer::Tool, 600, 600)
        );
        assert_eq!(rule.label(), "tool:a__*");

        let Err(ConfigError::Invalid(errors)) =
            load("[[limits.rate]]\nper = \"user\"\nrate = \"1/s\"\n")
        else {
            panic!("a wrong `per` is an error");
        };
        assert!(
            errors[0].message.contains("per = \"user\""),
            "{}",
            errors[0].message
        );
        assert!(load("[[limits.rate]]\nper = \"tool\"\nrate = \"often\"\n").is_err());
    }

    #[test]
    fn rates_read_as_count_and_period() {
        let rate = |t| parse_rate(t).map(|(n, p)| (n.get(), p));
        assert_eq!(rate("10/s"), Ok((10, Duration::from_secs(1))));
        assert_eq!(rate("600/min"), Ok((600, Duration::from_secs(60))));
        assert_eq!(rate("3/2s"), Ok((3, Duration::from_secs(2))));
        assert!(rate("0/s").unwrap_err().contains("allows nothing"));
        assert!(rate("ten/s").unwrap_err().contains("COUNT/PERIOD"));
        assert!(rate("10").unwrap_err().contains("COUNT/PERIOD"));
    }
}
