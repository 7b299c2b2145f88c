//! The formats' names and content types: what `export::write` writes is named on a command
//! line and served with its `Content-Type`.

use tracestat::export::{Format, ModelError};

#[test]
fn every_format_parses_from_its_name_and_has_its_content_type() {
    let expected = [
        (Format::Json, "json", "application/json"),
        (Format::Pprof, "pprof", "application/octet-stream"),
        (Format::Folded, "folded", "text/plain; charset=utf-8"),
        (
            Format::OpenMetrics,
            "openmetrics",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        (
            Format::Prometheus,
            "prometheus",
            "text/plain; version=0.0.4; charset=utf-8",
        ),
    ];
    assert_eq!(Format::ALL.len(), expected.len());
    for (format, name, content_type) in expected {
        assert_eq!(name.parse::<Format>(), Ok(format));
        assert_eq!(format.to_string(), name);
        assert_eq!(format.content_type(), content_type, "{format}");
    }
    assert_eq!(
        "yaml".parse::<Format>(),
        Err(ModelError::UnknownFormat("yaml".to_owned()))
    );
}
