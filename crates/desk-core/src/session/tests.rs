//! The session policy driven with a fake clock: `Instant`s are advanced by hand, nothing sleeps
//! and nothing touches a socket.

use super::*;

const START: (u16, u16) = (80, 24);

struct Rig {
    policy: SessionPolicy,
    t0: Instant,
    next: u64,
}

fn rig() -> Rig {
    rig_with(SizePolicy::Latest)
}

fn rig_with(size_policy: SizePolicy) -> Rig {
    Rig { policy: SessionPolicy::new(START, size_policy), t0: Instant::now(), next: 16 }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn hello(role: Role, cols: u16, rows: u16) -> Frame {
    Frame::Hello { version: PROTOCOL_VERSION, role, cols, rows, status_line: false, view: false }
}

fn code(effect: &Effect) -> Option<ErrorCode> {
    match effect {
        Effect::Send { frame: Frame::Error { code, .. }, .. }
        | Effect::Close { error: Frame::Error { code, .. }, .. }
        | Effect::Evict { error: Frame::Error { code, .. }, .. } => Some(*code),
        _ => None,
    }
}

fn resizes(effects: &[Effect]) -> Vec<(u16, u16)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Resize { cols, rows } => Some((*cols, *rows)),
            _ => None,
        })
        .collect()
}

impl Rig {
    fn at(&self, s: f64) -> Instant {
        self.t0 + secs(s)
    }

    fn effects(&mut self) -> Vec<Effect> {
        std::iter::from_fn(|| self.policy.poll_effect()).collect()
    }

    /// Accept a connection at `s` seconds; returns its id.
    fn connect(&mut self, s: f64) -> ClientId {
        let id = ClientId(self.next);
        self.next += 1;
        let now = self.at(s);
        self.policy.on_connect(id, now).expect("admitted");
        assert_eq!(self.effects(), [Effect::Arm { at: now + HANDSHAKE_DEADLINE, timer: Timer::Handshake(id) }]);
        id
    }

    /// Connect and say HELLO at `s` seconds; returns the id and the effects of the HELLO.
    fn join(&mut self, role: Role, size: (u16, u16), s: f64) -> (ClientId, Vec<Effect>) {
        let id = self.connect(s);
        let effects = self.frame(id, &hello(role, size.0, size.1), s);
        (id, effects)
    }

    /// A frame the policy answers with effects alone (its verdict is `Done`).
    fn frame(&mut self, client: ClientId, frame: &Frame, s: f64) -> Vec<Effect> {
        let (verdict, effects) = self.judged(client, frame, s);
        assert_eq!(verdict, Verdict::Done, "{frame:?}");
        effects
    }

    /// A frame whose content the loop may act on: the verdict, and the effects before it.
    fn judged(&mut self, client: ClientId, frame: &Frame, s: f64) -> (Verdict, Vec<Effect>) {
        let verdict = self.policy.on_frame(client, frame.clone(), self.at(s));
        (verdict, self.effects())
    }

    fn timer(&mut self, timer: Timer, s: f64) -> Vec<Effect> {
        self.policy.on_timer(timer, self.at(s));
        self.effects()
    }

    fn typed(&mut self, client: ClientId, s: f64) -> Vec<Effect> {
        assert_eq!(self.judged(client, &Frame::Input(b"x".to_vec()), s), (Verdict::Input(b"x".to_vec()), vec![]));
        self.policy.on_input_queued(client, self.at(s));
        self.effects()
    }

    fn close(&mut self, gone: &[ClientId]) -> Vec<Effect> {
        self.policy.on_closed(gone);
        self.effects()
    }
}

// ----- handshake -----

#[test]
fn a_client_that_never_says_hello_is_closed_at_the_handshake_deadline() {
    let mut rig = rig();
    let silent = rig.connect(0.0);
    let (talker, _) = rig.join(Role::Query, (0, 0), 1.0);
    // The loop fires a timer only when due; the armed deadline is exactly 10 s after accept.
    let closed = rig.timer(Timer::Handshake(silent), HANDSHAKE_DEADLINE.as_secs_f64());
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert!(matches!(closed[0], Effect::Close { client, .. } if client == silent));
    assert_eq!(code(&closed[0]), Some(ErrorCode::BadHello));
    // It is closed once, and the welcomed client is untouched.
    assert!(rig.timer(Timer::Handshake(silent), 20.0).is_empty());
    assert!(rig.timer(Timer::Handshake(talker), 11.0).is_empty());
}

#[test]
fn hello_cancels_the_handshake_deadline_and_welcomes_with_the_role() {
    let mut rig = rig();
    let id = rig.connect(0.0);
    let effects = rig.frame(id, &hello(Role::Viewer, 0, 0), 9.9);
    assert_eq!(
        effects,
        [
            Effect::Cancel { timer: Timer::Handshake(id) },
            Effect::Welcome { client: id, role: Role::Viewer, version: PROTOCOL_VERSION },
            Effect::StartStream { client: id },
            Effect::Attached { client: id, role: Role::Viewer },
        ]
    );
}

#[test]
fn a_query_client_is_welcomed_without_a_stream_or_an_announcement() {
    let mut rig = rig();
    let (id, effects) = rig.join(Role::Query, (0, 0), 0.0);
    assert_eq!(
        effects,
        [
            Effect::Cancel { timer: Timer::Handshake(id) },
            Effect::Welcome { client: id, role: Role::Query, version: PROTOCOL_VERSION }
        ]
    );
}

#[test]
fn a_first_frame_other_than_hello_fails_the_handshake() {
    let mut rig = rig();
    let id = rig.connect(0.0);
    let effects = rig.frame(id, &Frame::Ping(1), 0.1);
    assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::BadHello)]);
    assert!(
        matches!(&effects[0], Effect::Close { error: Frame::Error { message, .. }, .. } if message.contains("PING"))
    );
    // Nothing more is decided for a closed connection.
    assert!(rig.frame(id, &hello(Role::Controller, 100, 30), 0.2).is_empty());
}

fn hello_in(version: u16) -> Frame {
    Frame::Hello { version, role: Role::Query, cols: 0, rows: 0, status_line: false, view: false }
}

fn welcomed_in(effects: &[Effect]) -> Option<u16> {
    effects.iter().find_map(|e| match e {
        Effect::Welcome { version, .. } => Some(*version),
        _ => None,
    })
}

#[test]
fn a_hello_of_any_version_this_master_speaks_or_a_newer_one_is_answered_in_the_lower() {
    for (hello, welcome) in [(1, 1), (PROTOCOL_VERSION, PROTOCOL_VERSION), (PROTOCOL_VERSION + 1, PROTOCOL_VERSION)] {
        let mut rig = rig();
        let id = rig.connect(0.0);
        let effects = rig.frame(id, &hello_in(hello), 0.1);
        assert_eq!(welcomed_in(&effects), Some(welcome), "HELLO {hello}: {effects:?}");
    }
}

#[test]
fn a_version_no_desk_ever_spoke_is_refused_with_its_own_code() {
    let mut rig = rig();
    let id = rig.connect(0.0);
    let effects = rig.frame(id, &hello_in(0), 0.1);
    assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::UnsupportedVersion)]);
}

#[test]
fn a_master_speaking_version_1_refuses_every_other_version_in_words_as_version_1_did() {
    let mut rig =
        Rig { policy: SessionPolicy::new(START, SizePolicy::Latest).speaking(1), t0: Instant::now(), next: 16 };
    let id = rig.connect(0.0);
    let effects = rig.frame(id, &hello_in(2), 0.1);
    assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::UnsupportedVersion)]);
    let said = format!("{effects:?}");
    assert!(said.contains("protocol version 2 is not supported (this master speaks 1)"), "{said}");
    let id = rig.connect(0.2);
    assert_eq!(welcomed_in(&rig.frame(id, &hello_in(1), 0.3)), Some(1));
}

#[test]
fn a_streaming_client_may_lend_its_terminal_and_no_other_role_or_older_master_takes_one() {
    use desk_wire::TerminalOp;
    let take = Frame::Terminal(TerminalOp::Take { keys: vec![0x1c] });
    let mut rig = rig();
    for role in [Role::Controller, Role::Viewer] {
        let (id, _) = rig.join(role, (80, 24), 0.0);
        for op in [take.clone(), Frame::Terminal(TerminalOp::Ready), Frame::Terminal(TerminalOp::Paint(b"x".to_vec()))]
        {
            let Frame::Terminal(want) = op.clone() else { unreachable!() };
            assert_eq!(rig.judged(id, &op, 0.1), (Verdict::Terminal(want), vec![]), "{role:?}");
        }
        // What only a master sends closes the connection.
        let effects = rig.frame(id, &Frame::Terminal(TerminalOp::Redrawn), 0.2);
        assert!(matches!(effects[..], [Effect::Close { client, .. }] if client == id), "{effects:?}");
    }
    let (query, _) = rig.join(Role::Query, (0, 0), 0.3);
    let effects = rig.frame(query, &take, 0.4);
    assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::NotPermitted)]);
    // A master in version 2's compatibility mode does not know the frame type.
    let mut old =
        Rig { policy: SessionPolicy::new(START, SizePolicy::Latest).speaking(2), t0: Instant::now(), next: 16 };
    let id = old.connect(0.0);
    old.frame(
        id,
        &Frame::Hello { version: 2, role: Role::Controller, cols: 80, rows: 24, status_line: false, view: false },
        0.0,
    );
    let effects = old.frame(id, &take, 0.1);
    assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::UnknownType)]);
}

#[test]
fn a_second_hello_closes_the_connection() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Query, (0, 0), 0.0);
    let effects = rig.frame(id, &hello(Role::Query, 0, 0), 0.1);
    assert!(matches!(effects[..], [Effect::Close { client, .. }] if client == id), "{effects:?}");
    assert_eq!(code(&effects[0]), Some(ErrorCode::BadHello));
}

#[test]
fn frames_only_the_master_sends_close_the_client_as_malformed() {
    for frame in
        [Frame::Output(b"x".to_vec()), Frame::Exit { status: desk_wire::ExitStatus::Code(0), escalated: false }]
    {
        let mut rig = rig();
        let (id, _) = rig.join(Role::Controller, (0, 0), 0.0);
        let effects = rig.frame(id, &frame, 0.1);
        assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::Malformed)], "{frame:?}");
    }
}

#[test]
fn detach_and_a_client_error_release_the_client_without_a_reply() {
    let mut rig = rig();
    let (a, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    let (b, _) = rig.join(Role::Observer, (0, 0), 0.0);
    assert_eq!(rig.frame(a, &Frame::Detach, 1.0), [Effect::Release { client: a }]);
    let error = Frame::error(ErrorCode::Internal, "bye");
    assert_eq!(rig.frame(b, &error, 1.0), [Effect::Release { client: b }]);
}

// ----- roles -----

#[test]
fn each_role_is_refused_what_it_may_not_do_and_stays_connected() {
    let mut rig = rig();
    let signal = Frame::Signal { signal: 15, grace_ms: 0 };
    let hook = Frame::Hook(serde_json::Map::new());
    let input = Frame::Input(b"x".to_vec());
    let resize = Frame::Resize { cols: 100, rows: 30 };
    let cases: [(Role, &Frame, bool); 16] = [
        (Role::Controller, &input, true),
        (Role::Controller, &resize, true),
        (Role::Controller, &signal, true),
        (Role::Controller, &hook, true),
        (Role::Viewer, &input, false),
        // A viewer's RESIZE names its own view's size (never the session's, see below).
        (Role::Viewer, &resize, true),
        (Role::Viewer, &signal, false),
        (Role::Viewer, &hook, false),
        (Role::Observer, &input, true),
        (Role::Observer, &resize, false),
        (Role::Observer, &signal, true),
        (Role::Observer, &hook, true),
        (Role::Query, &input, false),
        // `desk resize` under `latest`: the size follows the controllers.
        (Role::Query, &resize, false),
        (Role::Query, &signal, true),
        (Role::Query, &hook, true),
    ];
    for (role, frame, allowed) in cases {
        let (id, _) = rig.join(role, (0, 0), 0.0);
        let (verdict, effects) = rig.judged(id, frame, 1.0);
        let refused = effects.iter().any(|e| code(e) == Some(ErrorCode::NotPermitted));
        assert_eq!(refused, !allowed, "{role:?} {frame:?}: {effects:?}");
        // A permitted INPUT or HOOK is handed back for the loop to act on; nothing else is.
        let handed_back = allowed && matches!(frame, Frame::Input(_) | Frame::Hook(_));
        assert_eq!(verdict != Verdict::Done, handed_back, "{role:?} {frame:?}: {verdict:?}");
        assert!(!effects.iter().any(|e| matches!(e, Effect::Close { .. })), "{role:?} {frame:?} closed");
        // The role's vocabulary is desk-wire's.
        match frame {
            Frame::Input(_) => assert_eq!(allowed, role.may_input()),
            Frame::Signal { .. } => assert_eq!(allowed, role.may_signal()),
            _ => {}
        }
    }
    // Refused frames have no effect: nothing was resized, queued, signalled or interpreted.
    let mut rig = self::rig();
    let (viewer, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    for frame in [&input, &signal, &hook] {
        let effects = rig.frame(viewer, frame, 1.0);
        assert!(matches!(effects[..], [Effect::Send { .. }]), "{effects:?}");
    }
    assert!(rig.frame(viewer, &resize, 1.0).is_empty(), "a viewer's RESIZE has no effect on the session");
    assert_eq!(rig.policy.size(), START);
}

#[test]
fn keys_and_notify_events_are_taken_from_every_role_but_a_viewer_and_other_events_close() {
    let event = |kind: &str| {
        let mut map = serde_json::Map::new();
        map.insert("type".into(), serde_json::Value::String(kind.into()));
        Frame::Event(map)
    };
    for role in [Role::Controller, Role::Observer, Role::Query] {
        let mut rig = rig();
        let (id, _) = rig.join(role, (0, 0), 0.0);
        for kind in ["keys", "notify"] {
            let Frame::Event(body) = event(kind) else { unreachable!() };
            assert_eq!(rig.judged(id, &event(kind), 1.0), (Verdict::Event(body), vec![]), "{role:?}");
        }
    }
    let mut rig = rig();
    let (viewer, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    let effects = rig.frame(viewer, &event("keys"), 1.0);
    assert!(matches!(effects[..], [Effect::Send { .. }]) && code(&effects[0]) == Some(ErrorCode::NotPermitted));
    // Keys into a terminal that closed are refused; the notify record is still taken.
    let (query, _) = rig.join(Role::Query, (0, 0), 0.0);
    rig.policy.on_terminal_closed();
    let effects = rig.frame(query, &event("keys"), 3.0);
    assert!(effects.iter().any(|e| code(e) == Some(ErrorCode::Exiting)), "{effects:?}");
    let Frame::Event(notify) = event("notify") else { unreachable!() };
    assert_eq!(rig.judged(query, &event("notify"), 3.0), (Verdict::Event(notify), vec![]));
    // Any other event from a client is still a protocol error.
    let mut rig = self::rig();
    let (query, _) = rig.join(Role::Query, (0, 0), 0.0);
    let effects = rig.frame(query, &event("title"), 1.0);
    assert!(effects.iter().any(|e| matches!(e, Effect::Close { .. }) && code(e) == Some(ErrorCode::Malformed)));
}

#[test]
fn every_role_gets_snapshots_and_pongs() {
    for role in [Role::Controller, Role::Viewer, Role::Observer, Role::Query] {
        let mut rig = rig();
        let (id, _) = rig.join(role, (0, 0), 0.0);
        let ask = Frame::SnapshotRequest { history: None };
        assert_eq!(rig.judged(id, &ask, 1.0), (Verdict::Snapshot { history: None }, vec![]));
        assert_eq!(rig.frame(id, &Frame::Ping(7), 1.0), [Effect::Send { client: id, frame: Frame::Pong(7) }]);
        assert!(rig.frame(id, &Frame::Pong(7), 1.0).is_empty());
    }
}

#[test]
fn input_after_the_terminal_closed_is_refused_as_exiting() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Observer, (0, 0), 0.0);
    rig.policy.on_terminal_closed();
    let effects = rig.frame(id, &Frame::Input(b"x".to_vec()), 1.0);
    assert_eq!(effects.iter().map(code).collect::<Vec<_>>(), [Some(ErrorCode::Exiting)]);
}

// ----- client limit -----

#[test]
fn the_client_limit_refuses_one_more_with_session_full_until_one_leaves() {
    let mut rig = rig();
    let held: Vec<ClientId> = (0..MAX_CLIENTS).map(|_| rig.connect(0.0)).collect();
    assert_eq!(rig.policy.client_count(), MAX_CLIENTS);
    // Unwelcomed connections count too.
    let refusal = rig.policy.on_connect(ClientId(999), rig.at(1.0)).expect_err("refused");
    assert!(matches!(refusal, Frame::Error { code: ErrorCode::SessionFull, .. }), "{refusal:?}");
    assert!(rig.effects().is_empty(), "a refused connection arms nothing");
    rig.close(&held[..1]);
    rig.connect(2.0);
    assert_eq!(rig.policy.client_count(), MAX_CLIENTS);
}

#[test]
fn a_closed_connection_cancels_its_timers() {
    let mut rig = rig();
    let id = rig.connect(0.0);
    assert_eq!(
        rig.close(&[id]),
        [Effect::Cancel { timer: Timer::Handshake(id) }, Effect::Cancel { timer: Timer::SlowClient(id) }]
    );
    // A timer that was already due finds nobody.
    assert!(rig.timer(Timer::Handshake(id), 10.0).is_empty());
}

// ----- slow clients -----

#[test]
fn a_client_behind_is_disconnected_at_exactly_the_deadline_and_not_before() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    let fell = rig.at(3.0);
    rig.policy.on_backlog_discarded(id, fell);
    assert_eq!(rig.effects(), [Effect::Arm { at: fell + SLOW_CLIENT_DEADLINE, timer: Timer::SlowClient(id) }]);
    // Fired a millisecond early (a coarse poll timeout): not yet; it looks again on time.
    let early = fell + SLOW_CLIENT_DEADLINE - Duration::from_millis(1);
    rig.policy.on_timer(Timer::SlowClient(id), early);
    assert_eq!(rig.effects(), [Effect::Arm { at: fell + SLOW_CLIENT_DEADLINE, timer: Timer::SlowClient(id) }]);
    rig.policy.on_timer(Timer::SlowClient(id), fell + SLOW_CLIENT_DEADLINE);
    let effects = rig.effects();
    assert!(matches!(effects[..], [Effect::Evict { client, .. }] if client == id), "{effects:?}");
    assert_eq!(code(&effects[0]), Some(ErrorCode::TooSlow));
    assert!(
        matches!(&effects[0], Effect::Evict { error: Frame::Error { message, .. }, .. } if message.contains("behind"))
    );
    // Evicted once.
    assert!(rig.timer(Timer::SlowClient(id), 30.0).is_empty());
}

#[test]
fn a_client_that_drains_in_time_survives() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Controller, (0, 0), 0.0);
    rig.policy.on_backlog_discarded(id, rig.at(1.0));
    rig.effects();
    rig.policy.on_drained(id);
    assert_eq!(rig.effects(), [Effect::Cancel { timer: Timer::SlowClient(id) }]);
    // Even a timer already due (popped in the same turn) evicts nobody.
    assert!(rig.timer(Timer::SlowClient(id), 1.0 + SLOW_CLIENT_DEADLINE.as_secs_f64()).is_empty());
    // Draining while on pace is nothing to report.
    rig.policy.on_drained(id);
    assert!(rig.effects().is_empty());
}

#[test]
fn falling_behind_again_after_draining_starts_a_new_deadline() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    rig.policy.on_backlog_discarded(id, rig.at(1.0));
    rig.policy.on_drained(id);
    rig.policy.on_backlog_discarded(id, rig.at(10.0));
    rig.effects();
    // The first fall's deadline passes: the client has been behind only 6 s.
    assert_eq!(
        rig.timer(Timer::SlowClient(id), 16.0),
        [Effect::Arm { at: rig.at(10.0) + SLOW_CLIENT_DEADLINE, timer: Timer::SlowClient(id) }]
    );
    let effects = rig.timer(Timer::SlowClient(id), 25.0);
    assert!(matches!(effects[..], [Effect::Evict { .. }]), "{effects:?}");
}

#[test]
fn a_discard_while_already_behind_keeps_the_first_deadline() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    rig.policy.on_backlog_discarded(id, rig.at(1.0));
    rig.effects();
    rig.policy.on_backlog_discarded(id, rig.at(5.0));
    assert!(rig.effects().is_empty());
    assert!(matches!(rig.timer(Timer::SlowClient(id), 16.0)[..], [Effect::Evict { .. }]));
}

#[test]
fn a_closing_client_that_stays_behind_is_still_evicted() {
    // It waits to be closed until its queue is written, which a client that does not read
    // never allows: without the eviction it would hold its slot for ever.
    let mut rig = rig();
    let (id, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    rig.policy.on_backlog_discarded(id, rig.at(1.0));
    rig.frame(id, &hello(Role::Viewer, 0, 0), 2.0);
    assert!(matches!(rig.timer(Timer::SlowClient(id), 16.0)[..], [Effect::Evict { .. }]));
}

// ----- size policies -----

#[test]
fn latest_follows_the_controller_that_most_recently_attached_or_typed() {
    let mut rig = rig();
    let (a, effects) = rig.join(Role::Controller, (100, 30), 0.0);
    assert_eq!(resizes(&effects), [(100, 30)]);
    let (b, effects) = rig.join(Role::Controller, (120, 40), 1.0);
    assert_eq!(resizes(&effects), [(120, 40)]);
    // A controller that is not the latest records its size; it is applied when it types.
    assert!(resizes(&rig.frame(a, &Frame::Resize { cols: 90, rows: 20 }, 2.0)).is_empty());
    assert_eq!(resizes(&rig.typed(a, 3.0)), [(90, 20)]);
    // Typing again changes nothing; the latest's RESIZE applies at once.
    assert!(resizes(&rig.typed(a, 4.0)).is_empty());
    assert_eq!(resizes(&rig.frame(a, &Frame::Resize { cols: 91, rows: 21 }, 5.0)), [(91, 21)]);
    // When the latest leaves, the most recently active remaining controller takes over.
    assert_eq!(resizes(&rig.close(&[a])), [(120, 40)]);
    assert_eq!(rig.policy.size(), (120, 40));
    let _ = b;
}

#[test]
fn latest_hands_over_once_when_several_controllers_leave_together() {
    let mut rig = rig();
    let (a, _) = rig.join(Role::Controller, (100, 30), 0.0);
    let (b, _) = rig.join(Role::Controller, (110, 30), 1.0);
    let (c, _) = rig.join(Role::Controller, (120, 30), 2.0);
    assert_eq!(resizes(&rig.close(&[c, b])), [(100, 30)]);
    let _ = a;
}

#[test]
fn a_controller_of_unknown_size_leaves_the_size_alone() {
    let mut rig = rig();
    let (_, effects) = rig.join(Role::Controller, (0, 0), 0.0);
    assert!(resizes(&effects).is_empty());
    assert_eq!(rig.policy.size(), START);
}

#[test]
fn viewers_never_resize_under_any_policy() {
    for size_policy in SizePolicy::ALL {
        let mut rig = rig_with(size_policy);
        let (viewer, effects) = rig.join(Role::Viewer, (200, 50), 0.0);
        assert!(resizes(&effects).is_empty(), "{size_policy}");
        assert!(resizes(&rig.frame(viewer, &Frame::Resize { cols: 10, rows: 5 }, 1.0)).is_empty());
        let (_, effects) = rig.join(Role::Observer, (10, 5), 2.0);
        assert!(resizes(&effects).is_empty(), "{size_policy}");
        assert_eq!(rig.policy.size(), START, "{size_policy}");
    }
}

#[test]
fn smallest_takes_the_narrowest_width_and_the_lowest_height() {
    let mut rig = rig_with(SizePolicy::Smallest);
    let (a, effects) = rig.join(Role::Controller, (100, 50), 0.0);
    assert_eq!(resizes(&effects), [(100, 50)]);
    let (b, effects) = rig.join(Role::Controller, (120, 40), 1.0);
    assert_eq!(resizes(&effects), [(100, 40)]);
    // Typing does not matter to it.
    assert!(resizes(&rig.typed(b, 2.0)).is_empty());
    assert_eq!(resizes(&rig.frame(b, &Frame::Resize { cols: 90, rows: 60 }, 3.0)), [(90, 50)]);
    assert_eq!(resizes(&rig.close(&[a])), [(90, 60)]);
    // The last controller leaving leaves the size as it is.
    assert!(resizes(&rig.close(&[b])).is_empty());
    assert_eq!(rig.policy.size(), (90, 60));
}

#[test]
fn largest_takes_the_widest_width_and_the_tallest_height_within_the_cell_bound() {
    let mut rig = rig_with(SizePolicy::Largest);
    let (_a, effects) = rig.join(Role::Controller, (100, 30), 0.0);
    assert_eq!(resizes(&effects), [(100, 30)]);
    let (b, effects) = rig.join(Role::Controller, (90, 50), 1.0);
    assert_eq!(resizes(&effects), [(100, 50)]);
    assert_eq!(resizes(&rig.close(&[b])), [(100, 30)]);
    // A wide and a tall terminal together would pass the cell bound: the larger one wins.
    let (_, effects) = rig.join(Role::Controller, (1000, 100), 2.0);
    assert_eq!(resizes(&effects), [(1000, 100)]);
    let (_, effects) = rig.join(Role::Controller, (150, 1000), 3.0);
    assert_eq!(resizes(&effects), [(150, 1000)]);
    assert!(desk_term::screen::valid_size(rig.policy.size().0, rig.policy.size().1));
}

#[test]
fn fixed_keeps_the_starting_size_whatever_controllers_report() {
    let mut rig = rig_with(SizePolicy::Fixed);
    let (a, effects) = rig.join(Role::Controller, (100, 30), 0.0);
    assert!(resizes(&effects).is_empty());
    assert!(resizes(&rig.frame(a, &Frame::Resize { cols: 120, rows: 40 }, 1.0)).is_empty());
    assert!(resizes(&rig.typed(a, 2.0)).is_empty());
    assert_eq!(rig.policy.size(), START);
}

/// `desk resize` speaks as a query client: under `fixed` it is the only way the size changes;
/// under the other policies it is refused (the next keystroke would undo it).
#[test]
fn an_operator_resize_sets_a_fixed_size_and_is_refused_under_the_other_policies() {
    let mut rig = rig_with(SizePolicy::Fixed);
    let (_controller, _) = rig.join(Role::Controller, (100, 30), 0.0);
    let (operator, _) = rig.join(Role::Query, (0, 0), 1.0);
    assert_eq!(resizes(&rig.frame(operator, &Frame::Resize { cols: 132, rows: 43 }, 2.0)), [(132, 43)]);
    assert_eq!(rig.policy.size(), (132, 43));
    // The controller's own resize still does not move it.
    let (controller, _) = rig.join(Role::Controller, (90, 20), 3.0);
    assert!(resizes(&rig.frame(controller, &Frame::Resize { cols: 91, rows: 21 }, 4.0)).is_empty());
    assert_eq!(rig.policy.size(), (132, 43));
    for size_policy in [SizePolicy::Latest, SizePolicy::Smallest, SizePolicy::Largest] {
        let mut rig = rig_with(size_policy);
        let (operator, _) = rig.join(Role::Query, (0, 0), 0.0);
        let effects = rig.frame(operator, &Frame::Resize { cols: 132, rows: 43 }, 1.0);
        assert_eq!(effects.iter().filter_map(code).collect::<Vec<_>>(), [ErrorCode::NotPermitted], "{size_policy}");
        assert!(resizes(&effects).is_empty(), "{size_policy}");
        assert_eq!(rig.policy.size(), START, "{size_policy}");
    }
}

#[test]
fn size_policies_parse_from_their_names_and_refuse_others() {
    for policy in SizePolicy::ALL {
        assert_eq!(policy.to_string().parse::<SizePolicy>(), Ok(policy));
    }
    assert_eq!(SizePolicy::default(), SizePolicy::Latest);
    let err = "biggest".parse::<SizePolicy>().unwrap_err();
    assert!(err.to_string().contains("\"biggest\"") && err.to_string().contains("smallest"), "{err}");
}

// ----- signals, stop grace -----

#[test]
fn a_stop_terminates_the_session_and_escalates_after_the_grace_period() {
    let mut rig = rig();
    rig.policy.on_stop_requested(rig.at(1.0));
    assert_eq!(
        rig.effects(),
        [
            Effect::Signal { signal: 15, helpers: true },
            Effect::Arm { at: rig.at(1.0) + STOP_GRACE, timer: Timer::Escalate }
        ]
    );
    assert!(rig.policy.escalation_pending());
    // A second kill signals again but does not extend the grace period.
    rig.policy.on_stop_requested(rig.at(2.0));
    assert_eq!(rig.effects(), [Effect::Signal { signal: 15, helpers: true }]);
    assert_eq!(rig.timer(Timer::Escalate, 6.0), [Effect::Kill { group: true }]);
    assert!(rig.policy.escalated());
    assert!(!rig.policy.escalation_pending());
}

#[test]
fn a_child_that_exits_within_the_grace_period_is_not_escalated_but_its_helpers_are_swept() {
    let mut rig = rig();
    let (query, _) = rig.join(Role::Query, (0, 0), 0.0);
    assert_eq!(
        rig.frame(query, &Frame::Signal { signal: 15, grace_ms: 3000 }, 1.0),
        [Effect::Signal { signal: 15, helpers: true }, Effect::Arm { at: rig.at(4.0), timer: Timer::Escalate }]
    );
    rig.policy.on_child_exited(rig.at(2.0));
    rig.effects();
    assert_eq!(rig.timer(Timer::Escalate, 4.0), [Effect::Kill { group: false }]);
    assert!(!rig.policy.escalated());
}

#[test]
fn a_signal_without_grace_never_escalates_and_signals_after_exit_are_ignored() {
    let mut rig = rig();
    let (query, _) = rig.join(Role::Query, (0, 0), 0.0);
    let effects = rig.frame(query, &Frame::Signal { signal: 2, grace_ms: 0 }, 1.0);
    assert_eq!(effects, [Effect::Signal { signal: 2, helpers: false }]);
    assert!(!rig.policy.escalation_pending());
    rig.policy.on_child_exited(rig.at(2.0));
    rig.effects();
    rig.policy.on_stop_requested(rig.at(3.0));
    assert!(rig.effects().is_empty());
}

// ----- exit -----

#[test]
fn exit_tells_welcomed_clients_refuses_the_rest_and_flushes_until_drained_or_the_deadline() {
    let mut rig = rig();
    let (viewer, _) = rig.join(Role::Viewer, (0, 0), 0.0);
    let silent = rig.connect(0.5);
    assert!(!rig.policy.may_finish(true, rig.at(1.0)), "the child still runs");
    let exited = rig.at(1.0);
    rig.policy.on_child_exited(exited);
    let effects = rig.effects();
    assert_eq!(effects.len(), 3, "{effects:?}");
    assert_eq!(effects[0], Effect::Exit { client: viewer });
    assert!(matches!(effects[1], Effect::Close { client, .. } if client == silent));
    assert_eq!(code(&effects[1]), Some(ErrorCode::Exiting));
    assert_eq!(effects[2], Effect::Arm { at: exited + EXIT_FLUSH_DEADLINE, timer: Timer::ExitFlush });
    // Clients with unread frames get until the deadline, and not a moment longer.
    assert!(!rig.policy.may_finish(false, exited + EXIT_FLUSH_DEADLINE - Duration::from_millis(1)));
    assert!(rig.policy.may_finish(false, exited + EXIT_FLUSH_DEADLINE));
    // Clients that read everything let the master go at once.
    assert!(rig.policy.may_finish(true, exited));
    // After the exit, a late HELLO is welcomed and closed, and nothing is announced.
    let late = rig.frame(silent, &hello(Role::Controller, 100, 30), 1.5);
    assert!(late.is_empty(), "closed connections decide nothing: {late:?}");
    let (_, late) = rig.join(Role::Controller, (100, 30), 1.5);
    assert!(matches!(late[1], Effect::Welcome { .. }), "{late:?}");
    assert_eq!(late.iter().filter_map(code).collect::<Vec<_>>(), [ErrorCode::Exiting]);
    assert!(resizes(&late).is_empty());
}

#[test]
fn a_client_told_of_the_exit_decides_nothing_more() {
    let mut rig = rig();
    let (id, _) = rig.join(Role::Controller, (0, 0), 0.0);
    // Its EXIT closes this client: an INPUT it sent meanwhile is not read.
    rig.policy.on_child_exited(rig.at(1.0));
    rig.effects();
    assert!(rig.frame(id, &Frame::Input(b"x".to_vec()), 1.5).is_empty());
}

#[test]
fn the_policy_keeps_every_streaming_clients_size_and_an_unknown_size_keeps_the_last() {
    let mut rig = rig();
    let (viewer, _) = rig.join(Role::Viewer, (40, 10), 0.0);
    let (controller, _) = rig.join(Role::Controller, (100, 30), 0.0);
    let (observer, _) = rig.join(Role::Observer, (90, 20), 0.0);
    assert_eq!(rig.policy.client_size(viewer), Some((40, 10)));
    assert_eq!(rig.policy.client_size(controller), Some((100, 30)));
    assert_eq!(rig.policy.client_size(observer), None, "an observer takes no output and has no view");
    assert!(rig.frame(viewer, &Frame::Resize { cols: 50, rows: 12 }, 1.0).is_empty());
    assert_eq!(rig.policy.client_size(viewer), Some((50, 12)));
    assert_eq!(rig.policy.size(), (100, 30), "a viewer's size is never the session's");
    for id in [viewer, controller] {
        let before = rig.policy.client_size(id);
        assert!(rig.frame(id, &Frame::Resize { cols: 0, rows: 0 }, 2.0).is_empty());
        assert_eq!(rig.policy.client_size(id), before, "a terminal that lost its size keeps the last");
    }
    // A handed-over record from before viewers' sizes were kept: the loop's record fills in.
    let (late, _) = rig.join(Role::Viewer, (0, 0), 3.0);
    rig.policy.adopt_client_size(late, Some((60, 15)));
    assert_eq!(rig.policy.client_size(late), Some((60, 15)));
    rig.policy.adopt_client_size(late, Some((70, 15)));
    assert_eq!(rig.policy.client_size(late), Some((60, 15)), "only where the policy knows none");
}
