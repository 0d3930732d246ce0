//! Dropping a cluster leaves no process, zombie, pending restart or directory behind.

mod common;

use std::time::Duration;

use common::{TestResult, process_exists, processes_mentioning};
use redquorum_testkit::LocalCluster;

#[test]
fn drop_kills_and_reaps_every_process_and_removes_the_directory() -> TestResult {
    let cluster = LocalCluster::builder().nodes(3).clock_shim(true).start()?;
    cluster.pause(1)?; // a stopped process must be killed too
    cluster.restart(2)?;
    let pids: Vec<u32> = (0..3).filter_map(|i| cluster.pid(i)).collect();
    assert_eq!(pids.len(), 3);
    let dir = cluster.dir().to_path_buf();
    assert!(dir.is_dir());
    let links = cluster.links()?;
    drop(cluster);
    for pid in pids {
        assert!(
            !process_exists(pid),
            "pid {pid} must be gone (killed and reaped)"
        );
    }
    assert!(!dir.exists(), "{} must be removed", dir.display());
    // The links of a dropped cluster are stopped; dropping them afterwards is harmless.
    drop(links);
    Ok(())
}

#[test]
fn a_pending_delayed_restart_never_starts_after_drop() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let port = cluster.port(0);
    let dir = cluster.dir().to_string_lossy().into_owned();
    cluster.restart_after(0, Duration::from_millis(200))?;
    drop(cluster);
    // An absence can only be checked by waiting past the delay.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        processes_mentioning(&dir).is_empty(),
        "no process may run in the dropped cluster's directory"
    );
    let connect = std::net::TcpStream::connect(("127.0.0.1", port));
    assert!(
        connect.is_err(),
        "nothing may listen on the dropped node's port"
    );
    Ok(())
}

#[test]
fn drop_kills_a_node_started_by_a_delayed_restart() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    cluster.restart_after(0, Duration::from_millis(20))?;
    cluster.wait_ready(0, Duration::from_secs(10))?;
    let pid = cluster.pid(0).ok_or("the node is back")?;
    drop(cluster);
    assert!(!process_exists(pid), "pid {pid} must be gone");
    Ok(())
}

#[test]
fn a_failed_start_leaves_nothing_running() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    // A wrapper that refuses to start node 1 (and says where the cluster lives), while
    // node 0 starts normally: the started node must be killed and the directory removed.
    let scratch = tempfile::tempdir()?;
    let wrapper = scratch.path().join("redis-server-wrapper");
    let seen = scratch.path().join("seen");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in */node-1) echo \"$a\" > {seen}; \
             echo 'refusing node 1' >&2; exit 1;; esac; done\nexec redis-server \"$@\"\n",
            seen = seen.display()
        ),
    )?;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))?;
    let result = LocalCluster::builder()
        .nodes(2)
        .redis_server(wrapper)
        .start();
    let err = result.expect_err("node 1 cannot start");
    assert!(err.to_string().contains("refusing node 1"), "{err}");
    let node1_dir = std::fs::read_to_string(&seen)?;
    let cluster_dir = std::path::Path::new(node1_dir.trim())
        .parent()
        .ok_or("node dir has a parent")?
        .to_path_buf();
    assert!(
        processes_mentioning(&cluster_dir.to_string_lossy()).is_empty(),
        "node 0 must have been killed"
    );
    assert!(!cluster_dir.exists(), "the directory must be removed");
    Ok(())
}
