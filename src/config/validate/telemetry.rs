//! `[telemetry]`: the OTLP endpoint (a URL), the sampling ratio (0.0 to 1.0), and the
//! standard `OTEL_*` variables for what the file leaves out.

use super::super::model::TelemetryConfig;
use super::super::raw;
use super::{Ctx, EnvLookup};

/// `[telemetry]` as set by the environment alone (the file has none, or is the default).
pub fn telemetry_from_env(env: EnvLookup<'_>) -> TelemetryConfig {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let defaults = TelemetryConfig::default();
    TelemetryConfig {
        otlp_endpoint: set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        service_name: set("OTEL_SERVICE_NAME").unwrap_or(defaults.service_name.clone()),
        ..defaults
    }
}

impl Ctx<'_> {
    pub(super) fn telemetry(&mut self, raw: raw::Telemetry) -> TelemetryConfig {
        let mut out = telemetry_from_env(self.env);
        if let Some(endpoint) = raw.otlp_endpoint {
            let endpoint = self.expand(&endpoint, &["telemetry", "otlp_endpoint"], true);
            out.otlp_endpoint = Some(endpoint).filter(|e| !e.is_empty());
        }
        if let Some(endpoint) = &out.otlp_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            self.error(
                &["telemetry", "otlp_endpoint"],
                None,
                format!("otlp_endpoint \"{endpoint}\" is not an http:// or https:// URL"),
                "write the collector's OTLP/HTTP base URL, e.g. \"http://127.0.0.1:4318\"",
            );
        }
        if let Some(ratio) = raw.sample_ratio {
            if (0.0..=1.0).contains(&ratio) {
                out.sample_ratio = ratio;
            } else {
                self.error(
                    &["telemetry", "sample_ratio"],
                    None,
                    format!("sample_ratio {ratio} is not between 0.0 and 1.0"),
                    "write the share of traces to keep, e.g. 0.1 for one in ten",
                );
            }
        }
        if let Some(name) = raw.service_name {
            out.service_name = name;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{TelemetryConfig, from_toml_str};

    fn load(text: &str, env: &[(&str, &str)]) -> Result<TelemetryConfig, Vec<String>> {
        let env = |name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let loaded = from_toml_str(text, Path::new("gateway.toml"), Path::new("/"), &env);
        match loaded {
            Ok(config) => Ok(config.telemetry),
            Err(e) => Err(e.diagnostics().iter().map(|d| d.message.clone()).collect()),
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(load("", &[]).unwrap(), TelemetryConfig::default());
        let from_env = load(
            "",
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_SERVICE_NAME", "gw"),
            ],
        );
        let from_env = from_env.unwrap();
        assert_eq!(from_env.otlp_endpoint.as_deref(), Some("http://c:4318"));
        assert_eq!(from_env.service_name, "gw");
        let text = "[telemetry]\notlp_endpoint = \"http://file:4318\"\nsample_ratio = 0.25\n";
        let file = load(text, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318")]).unwrap();
        assert_eq!(file.otlp_endpoint.as_deref(), Some("http://file:4318"));
        assert_eq!(file.sample_ratio, 0.25);
    }

    #[test]
    fn a_bad_ratio_or_endpoint_is_an_error() {
        let errors = load("[telemetry]\nsample_ratio = 1.5\n", &[]).unwrap_err();
        assert!(
            errors[0].contains("sample_ratio 1.5 is not between 0.0 and 1.0"),
            "{errors:?}"
        );
        let errors = load("[telemetry]\notlp_endpoint = \"collector:4318\"\n", &[]).unwrap_err();
        assert!(
            errors[0].contains("not an http:// or https:// URL"),
            "{errors:?}"
        );
        let errors = load("[telemetry]\nendpoint = \"http://c\"\n", &[]).unwrap_err();
        assert!(errors[0].contains("endpoint"), "{errors:?}");
    }
}
