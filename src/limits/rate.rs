//! Rate limits as GCRA token buckets (`governor`), one bucket per principal, profile or
//! tool that a rule's glob matches.

use std::time::Duration;

use globset::GlobMatcher;
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};

use super::Refusal;
use crate::config::{LimitsConfig, RatePer, RateRule};

/// The principal of the stdio client (the local user).
pub const LOCAL_PRINCIPAL: &str = "local";

struct Rule {
    rule: RateRule,
    matcher: Option<GlobMatcher>,
    buckets: DefaultKeyedRateLimiter<String>,
}

/// The rules in force, with their buckets.
pub struct RateLimits {
    config: LimitsConfig,
    rules: Vec<Rule>,
}

impl RateLimits {
    pub fn new(config: &LimitsConfig) -> RateLimits {
        let rules = (config.rate.iter())
            .map(|rule| {
                // The period per token, at least a nanosecond ("1000000000000/s" is no limit).
                let per_token = (rule.period / rule.count.get()).max(Duration::from_nanos(1));
                let quota = Quota::with_period(per_token)
                    .expect("a period of at least 1ns")
                    .allow_burst(rule.burst);
                Rule {
                    rule: rule.clone(),
                    // Validated with the config.
                    matcher: (rule.pattern.as_deref())
                        .and_then(|p| globset::Glob::new(p).ok())
                        .map(|g| g.compile_matcher()),
                    buckets: DefaultKeyedRateLimiter::keyed(quota),
                }
            })
            .collect();
        RateLimits {
            config: config.clone(),
            rules,
        }
    }

    pub fn config(&self) -> &LimitsConfig {
        &self.config
    }

    pub fn counts(&self, per: RatePer) -> bool {
        self.rules.iter().any(|r| r.rule.per == per)
    }

    /// Takes a token from each bucket of `key` under rules counting by `per`; the first
    /// empty one refuses.
    pub fn check(&self, per: RatePer, key: &str) -> Result<(), Refusal> {
        let applies =
            |r: &&Rule| r.rule.per == per && r.matcher.as_ref().is_none_or(|m| m.is_match(key));
        for rule in self.rules.iter().filter(applies) {
            let key = key.to_string();
            if let Err(not_until) = rule.buckets.check_key(&key) {
                let retry_after = not_until.wait_time_from(rule.buckets.clock().now());
                let label = rule.rule.label();
                return Err(Refusal {
                    message: format!(
                        "Rate limit exceeded: {} `{key}` is limited to {} ([[limits.rate]] {label}); retry in {} ms",
                        per.as_str(),
                        rule.rule.rate,
                        super::ceil_ms(retry_after)
                    ),
                    limit: label,
                    kind: "rate",
                    key,
                    retry_after,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RateLimits;
    use crate::config::{LimitsConfig, RatePer, RateRule};

    fn limits(per: RatePer, pattern: Option<&str>, rate: &str, burst: u32) -> RateLimits {
        let (count, period) = crate::config::parse_rate(rate).unwrap();
        RateLimits::new(&LimitsConfig {
            rate: vec![RateRule {
                per,
                pattern: pattern.map(str::to_string),
                count,
                period,
                burst: std::num::NonZeroU32::new(burst).unwrap(),
                rate: rate.into(),
            }],
        })
    }

    #[test]
    fn a_bucket_per_key_refuses_past_its_burst_and_says_when() {
        let rate = limits(RatePer::Tool, Some("time__*"), "2/s", 2);
        assert!(rate.check(RatePer::Tool, "time__now").is_ok());
        assert!(rate.check(RatePer::Tool, "time__now").is_ok());
        let refused = rate.check(RatePer::Tool, "time__now").unwrap_err();
        assert_eq!(refused.limit, "tool:time__*");
        assert!(
            refused.retry_after > Duration::ZERO
                && refused.retry_after <= Duration::from_millis(500)
        );
        assert_eq!(refused.retry_after_secs(), 1);
        // Another tool has its own bucket; one the glob does not match has none.
        assert!(rate.check(RatePer::Tool, "time__zone").is_ok());
        for _ in 0..10 {
            assert!(rate.check(RatePer::Tool, "echo__say").is_ok());
        }
        // A rule counts only what it is per.
        assert!(rate.check(RatePer::Principal, "time__now").is_ok());
    }

    #[test]
    fn waits_are_told_rounded_up() {
        assert_eq!(crate::limits::ceil_ms(Duration::from_micros(1600)), 2);
        assert_eq!(crate::limits::ceil_ms(Duration::from_millis(3)), 3);
        assert_eq!(crate::limits::ceil_ms(Duration::ZERO), 1);
    }
}
