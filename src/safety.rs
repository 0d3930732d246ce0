//! # What redquorum guarantees, under which assumptions, and how each claim is checked
//!
//! This module holds no code: it is the one place for redquorum's safety argument. The
//! [claims ledger](#the-claims-ledger) at the end ties every safety claim made in the README
//! and these docs to its assumption, the test on real masters that checks it, the model
//! instance (`model/`, `make model`) at a size where it could fail, and the negative control
//! that shows the check can see the failure. A claim without a row is a claim we do not
//! make; `tests/it/source/claims_ledger.rs` fails when a row names a test or model instance that
//! does not exist.
//!
//! # Assumptions
//! Redlock is safe under these assumptions, which you must provide:
//! - **Clocks advance at about the same rate** on every master and on the client: a
//!   master's clock may run fast by at most the drift allowance (`ttl · drift_factor + 2 ms`)
//!   over one ttl. Wall-clock *jumps* (a manual reset, a large NTP step) on a master break
//!   the lock; slew clocks, never step them.
//! - **A master that crashes comes back with its keys** (AOF with `appendfsync always`),
//!   **or stays out for at least the longest ttl in use.** The restart guard enforces the
//!   second for every client, for any number of masters losing data (below).
//! - **The holder stops using the lock at its deadline.** A process paused (GC, swap, a
//!   stopped VM) past its deadline may still believe it holds the lock.
//!   [`Lock::deadline`](crate::Lock::deadline) and [`Lease`](crate::Lease) make this easy;
//!   fencing tokens protect a resource from a holder that woke up too late.
//! - The members are **independent**: no replication between them, and no eviction policy
//!   that may drop lock keys (`noeviction`).
//! - Every client of a deployment runs with the restart guard on (or every client off), and
//!   a declared [`deployment_max_ttl`](crate::RedlockBuilder::deployment_max_ttl), if any, is
//!   the same on every client.
//!
//! # Mutual exclusion
//! A lock is granted only when `Q` members set our random value, and it is valid until
//! `start + ttl − drift`, where `start` was taken before the first request left. Two
//! quorums of `N` share a member; that member holds the first holder's key until its
//! deadline (clocks within the drift allowance), and its `SET NX` refuses the second. So two
//! holders need a member that lost the first one's key — the restart guard's job — and
//! with up to `N − Q` members down the rest can still grant.
//!
//! # The restart guard (v3)
//! A member that lost lock keys (a restart without `appendfsync always`, a `FLUSHALL`, a
//! Sentinel failover to a replica that missed writes) and counts again at once can grant a
//! lock another client still holds. The guard, on by default, keeps such a member out of
//! every quorum for the deployment's longest ttl, for every client, **for any number of
//! members losing data at any times**:
//!
//! - **Epochs.** Each member carries an epoch marker (`{prefix}guard`) shared by all
//!   clients. The first client to see a loss (marker gone; a restart of a member that does
//!   not persist every write; a new primary behind a Sentinel group) begins a new epoch
//!   atomically with the member's own time; the others read it. A grant counts only on a
//!   connection the client verified after it was made (a restart breaks every connection),
//!   and only while the epoch read back with the grant is the verified one.
//! - **The deployment's longest ttl.** No lock with ttl `t` is taken (or extended to a
//!   longer `t`) before a quorum acknowledged a ttl record `≥ t` sent less than `t/2` ago
//!   (records stay `2t`); extensions record their ttl atomically with the new expiry, in
//!   the same script and before it (a renewal batch's `extend_many.lua` once per call, for
//!   the one ttl of its locks, whenever any of them is extended). A member in a new epoch (since `D`) stays out until `D` plus the longest ttl read from
//!   `N − Q + 1` **trusted** other members.
//! - **Trusted readers.** A member that lost its own records would truthfully answer "no
//!   record". A reader counts only if its marker belongs to the live server (same `run_id`,
//!   and behind a Sentinel group the same replication id; or a durable restart) and its
//!   epoch began at least twice the longest possible ttl ago — a commissioned member's at
//!   time 0 ([`rules::reader_trusted`](crate::rules::reader_trusted)). Too few trusted
//!   readers: the member stays out until they answer, for `deployment_max_ttl` when
//!   declared, or for the hard maximum ttl.
//! - **Durable, only while every look says so.** A member persisting every write
//!   (`appendonly yes`, `appendfsync always`) whose marker survived a restart keeps its
//!   epoch — if every observation since the epoch began said so. Observations: every
//!   verification, record refresh (a quarter ttl while locking) and health check; one that
//!   says otherwise withdraws the epoch's durability. *What remains:* a run-time
//!   `CONFIG SET appendfsync everysec`, a grant and a crash all between two observations can
//!   make a restart look durable. Change persistence by restarting the member.
//! - **Commissioning only when no lock can be held.** A new member is out unless an operator
//!   commissions it, and a commissioned member counts at once — so commissioning (without
//!   `force`) is refused when the member holds lock keys or an epoch begun otherwise than by
//!   first sight; when another member remembers it in service (every verified member is
//!   remembered on the others: its identity for two weeks, its addresses — the URL and every
//!   `ip:port` its host resolves to — for good); when another member does not answer or the
//!   client knows no other; and when a lock may be held — a member holds a live ttl record,
//!   or none can be ruled out. A replacement for a lost member, commissioned while its locks
//!   are held, is therefore refused: reset it instead. What it cannot catch: a lock whose every
//!   record holder lost its data unnoticed, and a server restarted empty reached through an
//!   address no client used (a proxy, a virtual IP).
//!
//! *Why no lock is granted twice, for any number of losses.* Let member `m` lose the key of
//! a valid lock X (ttl `t`) at `U`. A client counts `m` again only after verifying it in an
//! epoch begun at `D ≥ U`. X's deadline comes from a chain of rounds — the record set its
//! acquisition waited for, then each extension set — each a quorum. Take the latest round all
//! of whose counted writes were applied when the verifier reads: its members' records
//! outlive that moment (a counted write is applied within `node_timeout < t/2` of its
//! round's start, rounds follow each other within `t`, records last `2t`). The verifier's
//! `N − Q + 1` trusted readers meet that round's quorum in a member that has lost nothing
//! since (it is trusted), which reports `≥ t`; so `m` stays out until `D + t`, past X's
//! deadline. Members that lost data themselves are never believed. The full argument, and
//! the first v3 design that a review broke (restoring a lost member's records from readers
//! a record round had not reached yet), are in `model/notes/guard-v3.md`.
//!
//! **What it costs.** Nothing on the hot path of a client that keeps locking (the epoch
//! rides in the `SET NX` pipeline; a record at most every quarter ttl per member). After a
//! loss the member is out for the deployment's longest ttl from the loss, and is not believed
//! as a reader for twice the longest possible ttl: **with `deployment_max_ttl` declared,
//! minutes; without, two weeks**. A verifier needs `N − Q + 1` trusted members besides the
//! one it verifies: with five members, 3 of the other 4 — after one loss every other member
//! qualifies; after two losses within that window, all three untouched members must answer;
//! after three, none can be verified until the window passes (or the declared bound stands
//! in). With three members, two losses within the window leave no trusted pair: declare
//! `deployment_max_ttl`. A single member has no one to read: after a loss it is out for the
//! declared bound, or for the hard maximum (7 days). New members nobody commissioned are out
//! until commissioned, or for a declared `deployment_max_ttl` from first sight.
//!
//! # Sentinel groups, failovers and `WAIT`
//! A member may be a Sentinel group. **A failover is a restart**: the new primary's
//! `run_id` differs, replication is asynchronous, so the guard treats it as a loss (never
//! durable) and keeps the group out for the longest ttl. That alone is safe against the
//! *new* primary. The remaining window is the **old primary** cut off from its sentinels but
//! still reachable by some clients: a holder's extensions there keep its lock alive while
//! the new primary's copy runs out. With [`Group::wait_replicas`](crate::Group::wait_replicas)
//! every write that keeps a grant alive through the group — acquisitions of every kind,
//! multi-resource locks, `extend`, `extend_with`, the batched renewal — is followed by
//! `WAIT` and counts only when enough replicas acknowledged; an old primary cut off from its
//! replicas gets none, its holder's renewals stop counting, and the holder is told it lost
//! the lock before its deadline passes.
//!
//! Which configurations close the window:
//! - `Replicas::All` (every replica the sentinels name, and every one this client has seen
//!   connected, must acknowledge): closed — the promoted replica acknowledged every write
//!   that counted. A replica that is down then fails every grant through the group.
//! - `Replicas::AtLeast(n)`: closed when the group has at most `n` replicas; with more, the
//!   replica promoted may be one that did not acknowledge while others did.
//! - No `WAIT`, with `min-replicas-to-write M` on the primaries: closed when `M` is the
//!   number of replicas (an old primary cut off from any of them refuses writes) and the
//!   replicas are read-only (`replica-read-only yes`, the default: the setting is enforced
//!   on primaries only, and a demoted primary that takes writes would keep a renewed key
//!   that never reaches the new primary); smaller `M` leaves the same gap as `AtLeast`.
//! - Neither: open — a holder that keeps a lock alive through an old primary can overlap a
//!   holder granted after the failover.
//!
//! **A group believed as a reader.** When the guard verifies a member that lost its data,
//! it reads the other members' ttl records and believes only some of them. A group's
//! primary cut off from its sentinels and replicas after a failover keeps its identity and
//! its old epoch, and a verifier that connected before may still reach it; but it misses
//! every record written on the new primary, so believing it could shorten a quarantine
//! when two other members lost the same records. A group is therefore believed only once
//! every replica it is known to have acknowledged the read: the read leaves a trace in its
//! own marker (a write, because `WAIT` counts replicas only up to the connection's last
//! write, and a cut-off primary still counts half-open replica links as connected), and
//! `WAIT` follows on the same connection. The count never shrinks: the most this client
//! ever knew for the group (the sentinels' count at each connection, or the primary's
//! `connected_slaves`). Otherwise the group counts as a reader fewer (the member stays out
//! until enough readers are believed, or for the declared `deployment_max_ttl`). The cost:
//! a group with a replica down, or with a dead old primary the sentinels still list after a
//! failover (until `SENTINEL RESET`), is not believed — and since the count never shrinks,
//! a client keeps needing that many replicas until it restarts. Declare
//! `deployment_max_ttl` when groups are members, so that a member that lost data is then
//! out for that bound rather than until enough readers are believed. Replicas hidden from
//! the sentinels (`replica-announced no`) are not supported.
//!
//! Not covered yet: ttl records written to a cut-off old primary still count toward a
//! record round; with a split brain that outlasts twice the longest ttl and two further
//! members losing data, a verifier could believe the new primary without the record
//! (found by review, not modelled). Requiring the same `WAIT` on record rounds through a
//! group was tried and not kept: with the dead old primary still listed, no record through
//! the group ever counted, and a three-member deployment with one master out of reach
//! could take no lock at all (`members::sentinel_split_brain` stopped granting). The model shows the double grant without the rule (`control-sentinel-stale-reader`:
//! five members, two losses, a verifier that kept the old primary) and none with it
//! (`sentinel-stale-reader`).
//!
//! **A failback under a connection kept idle.** Redis keeps client connections open across
//! `REPLICAOF`, so a client whose connection to a primary sent nothing while it was demoted
//! (no `READONLY`, no reconnect) still holds the guard's verification of that connection
//! when the primary is promoted back. If no client verified the interim primary, the marker
//! it hands back is the old epoch — though its full resync dropped the keys only it had.
//! The epoch and the connection cannot tell; the replication id can: every promotion draws
//! a new one, and a primary's id never comes back. So every grant through a group is
//! followed, on the same connection, by `INFO replication`, and counts only when the server
//! is a primary (`role:master`: a demoted primary that takes writes, `replica-read-only no`,
//! keeps its old id until it syncs) and `master_replid` is the one the guard verified (the
//! identity it checks behind a group is `run_id/master_replid`), judged under one lock with
//! the epoch and the quarantine. Another id withdraws the verification, and the group is
//! verified again as a failover; a replica's connection is replaced (the sentinels are asked
//! again), and a verification that finds a replica fails.
//! One cost besides the round trip: a primary also draws a new id whenever it creates its
//! replication backlog — when the first replica attaches after it booted without one, or
//! after `repl-backlog-ttl` (an hour by default) without any. The next grant is then refused
//! and the group quarantined for the longest ttl, as after a failover. `repl-backlog-ttl 0`
//! keeps a backlog once made; a group whose primary keeps its replicas attached never
//! pays this. All of it needs the restart guard (on by default): without it, no failover
//! or failback is covered. The
//! read rides with a fixed `WAIT` in one round trip; without `WAIT` it costs one more round
//! trip per grant through the group (not per renewal: an extension never recreates a key).
//! Extensions and renewals need no such read: one on a server that lost the key fails.
//! Assumed: nothing but a promotion or a restart removes keys from a primary that stays in
//! service (a `FLUSHALL` deletes the marker too, which the guard sees).
//!
//! # Fencing tokens
//! With [`fencing`](crate::RedlockBuilder::fencing) on, each acquisition gets a `u64` that
//! strictly increases across successive holders of a resource:
//! 1. On each member the acquire script, when it sets the lock key, also increments a
//!    per-resource counter `{prefix}fence:{resource}` and returns it.
//! 2. The token `T` is the largest value returned by the granting members.
//! 3. A write-back sets `counter = max(counter, T)`, only where our key still holds our
//!    value; the lock is handed out only if a quorum acknowledged, within its validity.
//!
//! *Why tokens increase.* Let B acquire after A. B's granting quorum and A's write-back
//! quorum share a member `k`. A's write-back reached `k` while A's key was on `k`, and B's
//! `SET NX` on `k` succeeded only after A's key left `k`; so B's increment on `k` exceeds
//! `T_A`, and so does `T_B`. It needs what Redlock needs plus **counters that survive
//! restarts (`appendfsync always`)**: the restart guard keeps a member that lost its data
//! from granting a held lock, but the counters it lost may have been one of only `Q` copies
//! of `T_A`. Taking the maximum from the acquire round alone is not monotonic either.
//!
//! # Lock kinds
//! - **Read-write.** Per member, the writer key and the readers (each with its own value and
//!   expiry); a read is granted only with no writer, a write only with no live reader and
//!   no writer. A writer and a reader granted at once would each hold a majority, and two
//!   majorities share a member that granted both — which its script forbids.
//! - **`k` permits need `⌊k·N/(k+1)⌋ + 1` members.** Each member admits at most `k`
//!   holders. `k + 1` holders granted at once on `Q` members each hold `(k + 1)·Q`
//!   admissions among `k·N` places: impossible once `(k + 1)·Q > k·N`. With a majority
//!   instead, four holders can share three permits on five members.
//! - **Reentrant** owners count their nested holds in the process: the quorum sees one
//!   holder.
//!
//! # Cancellation and release
//! Once a release has started, its deletes reach every member even if the caller's future
//! is dropped at any await point (the work is handed to a task before the first await), and
//! no renewal is sent after `release` returns. A failed or cancelled acquisition releases
//! every member from a task that outlives the caller. Releases, extensions and cleanup are
//! value-checked scripts: nothing redquorum sends touches a key holding another holder's
//! value, and an extension never recreates a key that is gone nor shortens one.
//!
//! # The claims ledger
//! Columns: the claim; what it assumes; the test on real masters (`tests/it/…::NAME`);
//! the model instance (`make model`; the instance's name); the negative control (a test or
//! a model control that must find the failure with the mechanism off).
//!
//! LEDGER-START
//! | claim | assumption | test on real masters | model instance | negative control |
//! |---|---|---|---|---|
//! | One holder at a time, with up to `N − Q` members down, slow or cut off | clocks within the drift allowance; the holder stops at its deadline | `one_of_five_masters_paused_for_1_5_s_every_2_s`, `blackholed_links_come_and_go`, `every_master_clock_0_3_percent_fast_within_the_drift_allowance` | `mutex-network`, `clocks` | `master_clocks_on_a_quorum_5_percent_fast_are_caught`, `control-e-zero-drift` |
//! | The restart guard: no lock granted twice for any number of members losing data (restarts without persistence, flushes, resets, replacements) | every client runs the guard; a declared `deployment_max_ttl` is the same everywhere | `two_flushed_masters_never_let_a_short_client_take_a_long_lock`, `two_losses_within_a_ttl_and_a_replacement_never_hand_a_held_lock_over`, `a_verification_racing_a_record_round_never_grants_twice`, `mixed_ttl_clients_stay_exclusive_through_restarts_and_flushes` | `five-two-losses`, `three-two-losses`, `mutex-restart`, `mutex-flush` | `negative_control_v2_readers_let_a_short_client_take_a_long_lock`, `negative_v2_readers_hand_a_long_lock_to_a_short_client`, `negative_without_the_guard_restarts_and_flushes_hand_a_held_lock_over`, `control-reader-no-age`, `control-vouch`, `control-a-guard-off` |
//! | A durable member counts at once after a restart only while every look since its epoch began said `appendfsync always` | persistence not switched, written and crashed between two looks | `a_health_check_sees_appendfsync_switched_at_run_time_and_the_restart_is_a_loss`, `renewals_see_appendfsync_switched_at_run_time_and_the_restart_is_a_loss` | `durability-kept`; `v3-durability-residual` finds the window the assumption excludes (`durability-observed`, every write observing and a clear of durable confirmed on disk by WAITAOF, closes it in the model; not built: WAITAOF needs Redis 7.2) | `control-g-durability-unobserved` |
//! | Commissioning never makes a member count at once while a lock may rely on its place | the records of a held lock survive on some member of its record set | `a_replacement_at_a_new_address_does_not_count_while_the_lost_masters_locks_may_be_held`, `a_flushed_master_in_service_is_not_commissioned_as_new_without_force`, `commissioning_a_flushed_master_alone_is_refused` | `five-replacement` | `control-commission-no-record-check`, `i19-finding-7-commission-forgets` |
//! | A failover is a restart: a promoted replica never grants a lock its old primary held | replication asynchronous, sentinels promote within their quorum | `failovers_with_and_without_lost_keys_never_hand_a_held_lock_over`, `with_the_failover_rule_a_lossy_failover_hands_nothing_over` | `sentinel-failover` | `negative_without_the_failover_rule_the_promoted_replica_grants_again` |
//! | A Sentinel group is believed as a reader of ttl records only while it is the group's primary (a verifier that kept a cut-off old primary gets a reader fewer, not a shorter quarantine) | every replica that could be promoted or acknowledge is known to the client (announced to the sentinels, or seen connected); a split brain that outlasts 2·Tmax with two further losses is not covered (records written to the old primary still count) | `a_group_cut_off_from_its_replicas_is_not_believed_as_a_reader` | `sentinel-stale-reader` (five members, two losses) | `negative_without_confirmed_readers_a_cut_off_primary_is_believed`, `control-sentinel-stale-reader` |
//! | A failback under a connection kept idle never grants a lock the old primary lost: a grant through a group counts only on the replication id that was verified | every promotion draws a new replication id (Redis and Valkey do); nothing else removes keys from a primary in service without touching the marker | `a_failback_under_an_idle_connection_is_seen_by_the_next_grant`, `a_writable_replica_under_an_idle_connection_never_counts` | `sentinel-failback`, `cluster-failback` | `negative_without_the_identity_per_grant_a_failback_hands_a_held_lock_over`, `control-sentinel-failback-epoch-only`, `cluster-failback-epoch-only`, `cluster-failback-run-id` |
//! | With `wait_replicas` (`All`, or `AtLeast(n)` with at most `n` replicas) an old primary cut off from its sentinels and replicas keeps no lock alive | as above | `a_holder_cut_off_with_an_old_primary_is_told_it_lost_the_lock_before_anyone_gets_it` | `sentinel-failover` | `negative_without_wait_on_renewals_the_old_primary_keeps_a_lock_someone_else_gets`, `i19-finding-2-renewal-without-wait` |
//! | Fencing tokens strictly increase across successive holders | fence counters survive restarts (`appendfsync always`) | `tokens_strictly_increase_over_a_thousand_holders_under_faults`, `with_the_write_back_the_same_history_gives_increasing_tokens` | `fencing` | `without_the_write_back_a_later_holder_can_get_a_smaller_token` |
//! | At most `k` holders of `k` permits | as for the mutex | `a_semaphore_never_admits_more_than_its_permits_under_faults` | `semaphore` | `a_majority_quorum_lets_four_holders_share_three_permits`, `control-d-semaphore-majority` |
//! | A writer holds alone: never with a reader or another writer | as for the mutex | `readers_share_and_writers_exclude_under_faults` | `rwlock` | `negative_a_minority_quorum_lets_a_writer_in_beside_a_reader` |
//! | A multi-resource lock is all or nothing on each member, and renewals count per lock | as for the mutex | `a_release_during_an_extension_never_leaves_a_key_alive`, `a_two_second_lock_held_for_five_seconds_stays_exclusive_and_is_gone_after`, `a_stolen_lock_among_many_renewed_together_is_lost_alone` | `multi-resource`, `batch-renewal` | `control-i-partial-grant`, `control-j-batch-per-member` |
//! | A release that has started reaches every member, even if its future is dropped, and is never overtaken by its own acquire | a member that cannot be reached expires the key by its ttl | `a_release_whose_future_is_dropped_at_once_still_deletes_the_keys`, `a_with_lock_dropped_right_after_its_body_returned_still_releases`, `a_release_is_not_overtaken_by_its_acquire_on_an_abandoned_connection`, `a_resend_on_a_connection_given_up_too_is_not_overtaken_by_the_release` | `generations` (one send per connection; the resend after a broken connection is checked on real masters only) | `i19-finding-5-release-overtakes-acquire` |
//! | Nothing redquorum sends changes a key that holds another holder's value (or an application's) | — | `a_delayed_redquorum_extend_and_release_never_touch_the_rivals_lock`, `an_empty_prefix_never_overwrites_application_keys`, `extend_many_raises_the_expiry_of_each_key_that_holds_its_value_only`, `a_stolen_lock_among_many_renewed_together_is_lost_alone` | `mutex-network` | `a_delayed_naive_set_xx_renewal_steals_the_rivals_lock`, `a_delayed_naive_pexpire_renewal_extends_the_rivals_lock`, `control-c-set-xx` |
//! LEDGER-END
