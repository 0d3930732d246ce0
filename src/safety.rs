//! # What redquorum guarantees, under which assumptions, and how each claim is checked
//!
//! This module holds no code: it is the one place for redquorum's safety argument. The
//! [claims ledger](#the-claims-ledger) at the end ties every safety claim made in the README
//! and these docs to its assumption, the test on real masters that checks it, the model
//! instance (`model/`, `make model`) at a size where it could fail, and the negative control
//! that shows the check can see the failure. A claim without a row is a claim we do not
//! make; `tests/claims_ledger.rs` fails when a row names a test or model instance that
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
//!   (records stay `2t`); extensions record their ttl atomically with the new expiry. A
//!   member in a new epoch (since `D`) stays out until `D` plus the longest ttl read from
//!   `N − Q + 1` **trusted** other members.
//! - **Trusted readers.** A member that lost its own records would truthfully answer "no
//!   record". A reader counts only if its marker belongs to the live server (same `run_id`,
//!   or a durable restart) and its epoch is **vouched for** — commissioned, or its records
//!   restored by a verifier that itself had `N − Q + 1` trusted readers — or older than twice
//!   the longest possible ttl ([`rules::reader_trusted`](crate::rules::reader_trusted)).
//!   Too few trusted readers: the member stays out until they answer, or for
//!   `deployment_max_ttl` when declared.
//! - **Durable, only while every look says so.** A member persisting every write
//!   (`appendonly yes`, `appendfsync always`) whose marker survived a restart keeps its
//!   epoch — if every observation since the epoch began said so. Observations: every
//!   verification, record refresh (a quarter ttl while locking) and health check; one that
//!   says otherwise withdraws the epoch's durability. *What remains:* a run-time
//!   `CONFIG SET appendfsync everysec`, a grant and a crash all between two observations can
//!   make a restart look durable. Change persistence by restarting the member.
//! - **Commissioning remembers.** A new member is out for the longest ttl unless an operator
//!   commissions it; every verified member is remembered (its `run_id` for two weeks, its
//!   address for good) on the others, and commissioning without `force` is refused when a
//!   member holds lock keys, carries an epoch begun otherwise than by first sight, or is
//!   remembered by any other member (every other member must answer).
//!
//! *Why no lock is granted twice, for any number of losses.* Invariant (I): while a record
//! set `C` of ttl `t` still covers a lock (before `s + 1.5t` for a record round sent at `s`,
//! before `e + t` for an extension at `e`), every member of `C` trusted at that moment holds
//! a record `≥ t`. A member that never lost data since it got the record holds it (`w + 2t`
//! is past the cover's end). One that lost data is untrusted until its epoch is `2·Tmax`
//! old — every record it lost has run out — or until a verifier vouched for it at `V`. That
//! verifier's `N − Q + 1` trusted readers meet the `Q − 1` other members of `C`, so by (I)
//! at `V` it read `L ≥ t`, and the record it restored lasts until `V + 2L`, past the cover.
//! Now let member `m` lose the key of a live lock X (ttl `t`) at `U`. A client counts `m`
//! again only after verifying it in an epoch with `D ≥ U`; its `N − Q + 1` trusted readers
//! meet X's record set, one reports `≥ t` by (I), so `m` is out until `D + t`, past X's
//! deadline. An extension of X after `U` that did not reach `m` leaves X's key on a quorum
//! without `m`. `model/notes/guard-v3.md` has the full argument.
//!
//! **What it costs.** Nothing on the hot path of a client that keeps locking (the epoch
//! rides in the `SET NX` pipeline; a record at most every quarter ttl per member). After a
//! loss the member is out for the deployment's longest ttl from the loss. A verifier needs
//! `N − Q + 1` trusted members besides the lost one (3 of the other 4 with five members):
//! after one loss every other member is trusted; after two losses within two weeks, the
//! second's verifier needs every untouched member to answer until the first was vouched for
//! (any client that reaches enough members vouches for it during its own verification).
//! New members nobody commissioned are out until commissioned, or for a declared
//! `deployment_max_ttl` from first sight — with neither, nothing can vouch for them.
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
//! - `Replicas::All` (every replica this client has seen connected must acknowledge):
//!   closed — the promoted replica acknowledged every write that counted.
//! - `Replicas::AtLeast(n)`: closed when the group has at most `n` replicas; with more, the
//!   replica promoted may be one that did not acknowledge while others did.
//! - No `WAIT`, with `min-replicas-to-write M` on the primaries: closed when `M` is the
//!   number of replicas (an old primary cut off from any of them refuses writes); smaller
//!   `M` leaves the same gap as `AtLeast`.
//! - Neither: open — a holder that keeps a lock alive through an old primary can overlap a
//!   holder granted after the failover.
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
//! Columns: the claim; what it assumes; the test on real masters (`tests/FILE.rs::NAME`);
//! the model instance (`make model`; the instance's name); the negative control (a test or
//! a model control that must find the failure with the mechanism off).
//!
//! LEDGER-START
//! LEDGER-END
