//! Validation of every builder option.
use super::*;

fn three() -> RedlockBuilder {
    RedlockBuilder::default().nodes(["redis://a:1", "redis://b:1", "redis://c:1"])
}

fn err(builder: RedlockBuilder) -> ConfigError {
    builder
        .build()
        .expect_err("the builder should have refused")
}

#[test]
fn defaults_build_and_derive_the_node_timeout_from_the_ttl() {
    let r = three().build().expect("defaults are valid");
    assert_eq!(r.core().config.node_timeout, DEFAULT_NODE_TIMEOUT);
    let r = three()
        .ttl(Duration::from_millis(200))
        .build()
        .expect("valid");
    assert_eq!(r.core().config.node_timeout, Duration::from_millis(20));
    let t = r
        .core()
        .config
        .timing(Duration::from_millis(200))
        .expect("valid");
    assert_eq!(t.drift, Duration::from_millis(4));
    assert_eq!(t.min_validity, Duration::from_millis(20));
}

#[test]
fn every_bad_option_has_its_own_error() {
    assert_eq!(err(RedlockBuilder::default()), ConfigError::NoNodes);
    assert!(matches!(
        err(three().node("redis://:pw@b:1/3")),
        ConfigError::DuplicateNode { first: 1, second: 3, ref url } if !url.contains("pw")
    ));
    assert!(matches!(
        err(three().node("not a url")),
        ConfigError::InvalidUrl { index: 3, .. }
    ));
    assert_eq!(
        err(three().ttl(Duration::ZERO)),
        ConfigError::TtlTooSmall(Duration::ZERO)
    );
    assert_eq!(
        err(three().ttl(Duration::from_micros(999))),
        ConfigError::TtlTooSmall(Duration::from_micros(999))
    );
    assert!(matches!(
        err(three().ttl(MAX_TTL * 2)),
        ConfigError::TtlTooLarge { .. }
    ));
    assert!(matches!(
        err(three().ttl(Duration::from_millis(2))),
        ConfigError::TtlLeavesNoValidity { .. }
    ));
    assert_eq!(
        err(three().node_timeout(Duration::ZERO)),
        ConfigError::ZeroNodeTimeout
    );
    assert!(matches!(
        err(three().node_timeout(Duration::from_secs(10))),
        ConfigError::NodeTimeoutTooLong { .. }
    ));
    assert!(matches!(
        err(three().node_timeout(Duration::from_secs(5))),
        ConfigError::NodeTimeoutTooLong { .. }
    ));
    for bad in [-0.1, 0.5, 1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            err(three().drift_factor(bad)),
            ConfigError::DriftFactorOutOfRange(_)
        ));
    }
    assert_eq!(
        err(three().retry(RetryPolicy::new().attempts(0))),
        ConfigError::ZeroAttempts
    );
    assert!(matches!(
        err(three().min_validity(Duration::from_secs(10))),
        ConfigError::TtlLeavesNoValidity { .. }
    ));
}

#[test]
fn an_even_node_count_is_allowed() {
    let r = three()
        .node("redis://d:1")
        .build()
        .expect("four masters are allowed");
    assert_eq!(r.quorum(crate::LockKind::Mutex), 3);
}

#[test]
fn debug_output_hides_passwords() {
    let b = three().node("redis://user:hunter2@d:1");
    assert!(!format!("{b:?}").contains("hunter2"));
    let r = b.build().expect("valid");
    assert!(!format!("{r:?}").contains("hunter2"));
}
