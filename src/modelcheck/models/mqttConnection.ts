import type { AnyStateMachine } from "xstate";
import {
  type ConnectRequest,
  type ConnectTerms,
  mqttConnectionMachine,
  termsOf,
  type WillMessage,
} from "../../machines/mqttConnection.js";
import { atMost, Broken, canAlwaysEnd, emits, emitsWhere, fields, inState, invariant, type Model } from "../model.js";

const will = (delayMs: number): WillMessage => ({
  topic: "will",
  payload: new Uint8Array(),
  qos: 1,
  retain: false,
  delayMs,
});

/** One request for each way the guards can decide: keep alive on or off, a will or none, a delay or none. */
const requests: ConnectRequest[] = [
  { protocolVersion: 4, clientId: "a", keepaliveSec: 30, cleanStart: true, sessionExpirySec: 0 },
  { protocolVersion: 5, clientId: "b", keepaliveSec: 0, cleanStart: false, sessionExpirySec: 60, will: will(0) },
  { protocolVersion: 5, clientId: "c", keepaliveSec: 10, cleanStart: true, sessionExpirySec: 0, will: will(5_000) },
];

const NORMAL = 0x00;
const WITH_WILL = 0x04;

/**
 * The MQTT connection machine with the world around it: a client that may send
 * anything at any time, NATS that may accept, refuse, drop and come back, an operator
 * who kicks, a second connection that takes over, a gateway that goes lame duck.
 * Pass a variant of the machine (tests break one on purpose) to check it instead.
 */
export const mqttConnectionModel = (machine: AnyStateMachine = mqttConnectionMachine): Model => ({
  machine,
  input: { connectTimeoutMs: 10_000, maxKeepaliveSec: 0 },
  bound: `${requests.length} CONNECT requests (v4 keep-alive 30 s no will; v5 no keep-alive will now; v5 keep-alive 10 s will after 5 s), each also with its NATS access known at once (up or down), DISCONNECT 0x00/0x04 (with and without a session expiry), NATS accept (up or down)/refuse (auth or not), the session ready (present or not) or refused, 14 other events (a hand-off to the session's home worker, the connect and keep-alive clocks among them; takeovers by a connection that resumes the session, starts clean, or of unknown kind); every order, timers fire at any point`,
  events: [
    ...requests.map((request) => ({ type: "CONNECT", terms: termsOf(request) })),
    ...requests.flatMap((request) =>
      [true, false].map((natsUp) => ({ type: "CONNECT", terms: termsOf(request), nats: { account: "A", natsUp } })),
    ),
    { type: "NATS_ACQUIRED", account: "A", natsUp: true },
    { type: "NATS_ACQUIRED", account: "A", natsUp: false },
    { type: "SESSION_READY", sessionPresent: false },
    { type: "SESSION_READY", sessionPresent: true },
    { type: "SESSION_REFUSED", reason: "no JetStream" },
    { type: "NATS_REFUSED", auth: true, reason: "bad password" },
    { type: "NATS_REFUSED", auth: false, reason: "no servers" },
    // The gateway's own clock (actors/mqtt/keepaliveWheel.ts), at any point like a timer.
    { type: "CONNECT_TIMEOUT" },
    { type: "KEEPALIVE_EXPIRED" },
    { type: "DISCONNECT", reasonCode: NORMAL },
    { type: "DISCONNECT", reasonCode: WITH_WILL },
    { type: "DISCONNECT", reasonCode: WITH_WILL, sessionExpirySec: 30 },
    { type: "PROTOCOL_ERROR", reasonCode: 0x81, reason: "malformed" },
    { type: "SOCKET_CLOSED" },
    { type: "NATS_DOWN" },
    { type: "NATS_UP" },
    { type: "KICK" },
    { type: "TAKEN_OVER" },
    { type: "TAKEN_OVER", resumed: true },
    { type: "TAKEN_OVER", resumed: false },
    { type: "LAME_DUCK" },
    { type: "SHUTDOWN" },
    { type: "WILL_DONE" },
    { type: "HAND_OFF", worker: 2 },
  ],
  invariants: [
    atMost("a will is published at most once", "publish_will"),
    // [MQTT-3.14.4-3]
    invariant("no will after a normal DISCONNECT", false, (normal: boolean, step) => {
      if (normal && emits(step, "publish_will")) return new Broken("publish_will after DISCONNECT 0x00");
      return (
        normal ||
        (step.event.type === "DISCONNECT" &&
          fields(step.event).reasonCode !== WITH_WILL &&
          inState(step.before, "session.serving"))
      );
    }),
    // [MQTT-3.1.3-9] MQTT 5 3.1.3.2.2: a newer connection that resumes the session before the will's
    // delay passed cancels it (a will without delay goes at the close; a clean start ends the session).
    invariant(
      "a delayed will is cancelled when a newer connection resumes the session",
      false,
      (resumed: boolean, step) => {
        const delayed = ((step.after.context as { terms?: ConnectTerms }).terms?.willDelayMs ?? 0) > 0;
        if (resumed && delayed && emits(step, "publish_will"))
          return new Broken("publish_will after a takeover that resumed the session");
        const heard = inState(step.before, "session.serving") || inState(step.before, "willPending");
        return resumed || (step.event.type === "TAKEN_OVER" && fields(step.event).resumed === true && heard);
      },
    ),
    invariant("no will when the gateway itself closes the connection", false, (ours: boolean, step) => {
      if (ours && emits(step, "publish_will")) return new Broken("publish_will after lame duck or shutdown");
      return (
        ours ||
        ((step.event.type === "LAME_DUCK" || step.event.type === "SHUTDOWN") && inState(step.before, "session.serving"))
      );
    }),
    invariant("CONNACK precedes serve", false, (acked: boolean, step) => {
      for (const e of step.emitted) {
        if (e.type === "connack" && fields(e).returnCode === 0) acked = true;
        if (e.type === "serve" && !acked) return new Broken("serve before a successful CONNACK");
      }
      return acked;
    }),
    atMost("one CONNACK per connection", "connack"),
    // docs/decisions/session-homes.md: the home worker answers the CONNECT; this one has done nothing of it.
    invariant(
      "a connection handed to another worker acted on nothing of its CONNECT",
      false,
      (acted: boolean, step) => {
        if (emits(step, "hand_off") && (acted || !inState(step.before, "awaitingConnect")))
          return new Broken(`handed off after acting on the CONNECT (${step.event.type})`);
        if (emits(step, "hand_off") && step.after.status !== "done") return new Broken("went on after handing off");
        return (
          acted ||
          ["acquire_nats", "open_session", "connack", "publish_will", "close"].some((t) => emits(step, t)) ||
          inState(step.after, "session")
        );
      },
    ),
    // The session machine hears the end of the network side once, whatever ends it.
    atMost("the session is detached at most once", "detach_session"),
    invariant("a session opened is detached before the connection closes", false, (opened: boolean, step) => {
      const open = (opened || emits(step, "open_session")) && !emits(step, "detach_session");
      return open && step.after.status === "done" ? new Broken("closed with its session still attached") : open;
    }),
    invariant("a DISCONNECT that raises the expiry from 0 ends the session anyway", null, (_: null, step) =>
      emitsWhere<{ type: string; expirySec: number }>(step, "detach_session", (e) => e.expirySec > 0) &&
      fields(step.before?.context ?? {}).sessionExpirySec === 0
        ? new Broken("a session with expiry 0 at CONNECT was kept")
        : null,
    ),
    // A taken-over or kicked session delivers nothing more on the old connection.
    invariant("nothing is served after leaving serving", false, (left: boolean, step) => {
      if (left && (emits(step, "serve") || inState(step.after, "session.serving")))
        return new Broken(`back in serving after leaving it (${step.event.type})`);
      return left || (inState(step.before, "session.serving") && !inState(step.after, "session.serving"));
    }),
    invariant("a kicked or taken-over client is told why", null, (_: null, step) => {
      if (!inState(step.before, "session.serving")) return null;
      const told = (code: number) =>
        emitsWhere<{ type: string; reasonCode: number }>(step, "disconnect", (e) => e.reasonCode === code);
      if (step.event.type === "KICK" && !told(0x98)) return new Broken("KICK without DISCONNECT 0x98");
      if (step.event.type === "TAKEN_OVER" && !told(0x8e)) return new Broken("TAKEN_OVER without DISCONNECT 0x8E");
      return null;
    }),
    invariant("lame duck never accepts a new connection", false, (lame: boolean, step) => {
      if (
        lame &&
        (emits(step, "acquire_nats") ||
          emits(step, "serve") ||
          emitsWhere<{ type: string; returnCode: number }>(step, "connack", (e) => e.returnCode === 0))
      )
        return new Broken(`accepted a connection after lame duck (${step.event.type})`);
      return lame || step.event.type === "LAME_DUCK" || step.event.type === "SHUTDOWN";
    }),
  ],
  progress: [
    canAlwaysEnd,
    { name: "ends on its own timers once the socket has closed", after: (step) => step.event.type === "SOCKET_CLOSED" },
    {
      name: "never waits on the client without a timer",
      after: () => true,
      // What the gateway itself answers (its NATS login, the will's publish, its connect and
      // keep-alive clocks) may be waited for.
      using: (e) =>
        [
          "NATS_ACQUIRED",
          "NATS_REFUSED",
          "SESSION_READY",
          "SESSION_REFUSED",
          "WILL_DONE",
          "CONNECT_TIMEOUT",
          "KEEPALIVE_EXPIRED",
        ].includes(e.type),
      reach: (s) => s.status === "done" || s.hasTag("serving"),
    },
  ],
});
