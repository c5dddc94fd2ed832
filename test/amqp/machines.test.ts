// The AMQP machines one behaviour at a time, on a simulated clock: what state each event
// leads to and which commands it emits for the actor to carry out.

import { describe, expect, it } from "vitest";
import { type AnyStateMachine, SimulatedClock } from "xstate";
import { startChildMachine } from "../../src/actors/machineActor.js";
import { stateName } from "../../src/actors/registry.js";
import { amqpConnectionMachine } from "../../src/machines/amqpConnection.js";
import { amqpReceiverLinkMachine, amqpSenderLinkMachine } from "../../src/machines/amqpLink.js";
import { amqpSessionMachine } from "../../src/machines/amqpSession.js";

function run(machine: AnyStateMachine, input: unknown) {
  const clock = new SimulatedClock();
  const emitted: Array<{ type: string } & Record<string, unknown>> = [];
  const { actor } = startChildMachine(machine, { input, clock, onEmit: (e) => emitted.push(e as never) });
  return {
    actor,
    emitted,
    clock,
    send: (e: Record<string, unknown> & { type: string }) => actor.send(e as never),
    state: () => {
      const s = actor.getSnapshot();
      return s.status === "active" ? stateName(s.value) : s.status;
    },
    types: () => emitted.map((e) => e.type),
  };
}

const connection = () =>
  run(amqpConnectionMachine, { handshakeTimeoutMs: 1_000, idleTimeoutMs: 60_000, closeGraceMs: 2_000 });
const PLAIN = { credentials: { user: "u", pass: "p" }, username: "u", mechanism: "PLAIN" };

describe("amqpConnection", () => {
  it("SASL, then NATS, then the open: serving", () => {
    const c = connection();
    c.send({ type: "HEADER", sasl: true });
    expect(c.state()).toBe("saslExchange");
    c.send({ type: "AUTHENTICATE", login: PLAIN });
    expect(c.emitted.at(-1)).toEqual({ type: "acquire_nats", login: PLAIN });
    c.send({ type: "NATS_READY", account: "A" });
    expect(c.emitted.at(-1)).toEqual({ type: "sasl_outcome", ok: true });
    expect(c.state()).toBe("awaitingOpen");
    c.send({ type: "OPENED", containerId: "client-1" });
    expect(c.state()).toBe("serving.idle.watching");
    expect(c.emitted.at(-1)).toEqual({ type: "serve" });
    expect(c.actor.getSnapshot().context.containerId).toBe("client-1");
  });

  it("a login NATS refuses over SASL is SASL's auth outcome; the client is cut off if it lingers", () => {
    const c = connection();
    c.send({ type: "HEADER", sasl: true });
    c.send({ type: "AUTHENTICATE", login: PLAIN });
    c.send({ type: "NATS_REFUSED", auth: true, reason: "Authorization Violation" });
    expect(c.emitted.at(-1)).toEqual({ type: "sasl_outcome", ok: false });
    expect(c.state()).toBe("saslRefused");
    c.clock.increment(2_000);
    expect(c.state()).toBe("done");
    expect(c.types().at(-1)).toBe("close");
  });

  it("a SASL refusal rhea answered itself (malformed PLAIN, mechanism not offered) gets the same grace, then the close", () => {
    const c = connection();
    c.send({ type: "HEADER", sasl: true });
    c.send({ type: "SASL_REFUSED", reason: "PLAIN response not accepted" });
    expect(c.state()).toBe("saslRefused");
    // rhea wrote the outcome: the machine neither answers SASL again nor asks NATS.
    expect(c.types()).toEqual([]);
    c.clock.increment(1_999);
    expect(c.state()).toBe("saslRefused");
    c.clock.increment(1);
    expect(c.state()).toBe("done");
    expect(c.types()).toEqual(["close"]);
    expect(c.actor.getSnapshot().context.closeReason).toBe("SASL refused: PLAIN response not accepted");
  });

  it("a SASL refusal outside the SASL exchange changes nothing", () => {
    const c = connection();
    c.send({ type: "SASL_REFUSED", reason: "early" });
    expect(c.state()).toBe("awaitingHeader");
    c.send({ type: "HEADER", sasl: true });
    c.send({ type: "AUTHENTICATE", login: PLAIN });
    c.send({ type: "SASL_REFUSED", reason: "late" });
    expect(c.state()).toBe("authenticating");
  });

  it("without SASL, a refusal waits for the open and closes with amqp:unauthorized-access", () => {
    const c = connection();
    c.send({ type: "HEADER", sasl: false });
    expect(c.emitted.at(-1)).toMatchObject({ type: "acquire_nats", login: { mechanism: "none", credentials: {} } });
    c.send({ type: "NATS_REFUSED", auth: true, reason: "no" });
    expect(c.state()).toBe("loginRefused");
    c.send({ type: "OPENED", containerId: "x" });
    expect(c.emitted.at(-1)).toEqual({
      type: "close_connection",
      error: { condition: "amqp:unauthorized-access", description: "NATS refused: no" },
    });
    expect(c.state()).toBe("closing");
  });

  it("a gateway limit (connections per account) lets SASL succeed, then answers the open with its close", () => {
    const error = { condition: "amqp:resource-limit-exceeded", description: "account A has 2 connections" };
    const c = connection();
    c.send({ type: "HEADER", sasl: true });
    c.send({ type: "AUTHENTICATE", login: PLAIN });
    c.send({ type: "LIMIT_REFUSED", error });
    expect(c.emitted.at(-1)).toEqual({ type: "sasl_outcome", ok: true });
    expect(c.state()).toBe("loginRefused");
    c.send({ type: "OPENED", containerId: "x" });
    expect(c.emitted.at(-1)).toEqual({ type: "close_connection", error });
    expect(c.state()).toBe("closing");
    expect(c.types()).not.toContain("serve");
  });

  it("without SASL, a limit refusal after the open closes at once with the limit's error", () => {
    const error = { condition: "amqp:resource-limit-exceeded", description: "limit" };
    const c = connection();
    c.send({ type: "HEADER", sasl: false });
    c.send({ type: "OPENED", containerId: "early" });
    c.send({ type: "LIMIT_REFUSED", error });
    expect(c.emitted.at(-1)).toEqual({ type: "close_connection", error });
    expect(c.types()).not.toContain("sasl_outcome");
    expect(c.state()).toBe("closing");
  });

  it("without SASL, an open before NATS answers is served once it does", () => {
    const c = connection();
    c.send({ type: "HEADER", sasl: false });
    c.send({ type: "OPENED", containerId: "early" });
    c.send({ type: "NATS_READY", account: "" });
    expect(c.state()).toBe("serving.idle.watching");
  });

  it("a header the gateway does not speak is answered with its own, then closed", () => {
    const c = connection();
    c.send({ type: "HEADER_MISMATCH", description: "HTTP" });
    expect(c.types()).toEqual(["answer_header", "close"]);
    expect(c.state()).toBe("done");
  });

  it.each([
    ["awaitingHeader", []],
    ["saslExchange", [{ type: "HEADER", sasl: true }]],
    [
      "awaitingOpen",
      [
        { type: "HEADER", sasl: true },
        { type: "AUTHENTICATE", login: PLAIN },
        { type: "NATS_READY", account: "" },
      ],
    ],
  ] as const)("the handshake has limits.connect_timeout to get past %s", (_state, events) => {
    const c = connection();
    for (const e of events) c.send(e as never);
    c.clock.increment(999);
    expect(c.state()).not.toBe("done");
    c.clock.increment(1);
    expect(c.state()).toBe("done");
  });

  function serving() {
    const c = connection();
    c.send({ type: "HEADER", sasl: false });
    c.send({ type: "NATS_READY", account: "" });
    c.send({ type: "OPENED", containerId: "c" });
    return c;
  }

  it("idle timeout: activity keeps the connection; silence closes it with amqp:resource-limit-exceeded", () => {
    const c = serving();
    c.clock.increment(50_000);
    c.send({ type: "ACTIVITY" });
    c.clock.increment(50_000);
    expect(c.state()).toBe("serving.idle.watching");
    c.clock.increment(10_000);
    expect(c.emitted.at(-1)).toEqual({
      type: "close_connection",
      error: { condition: "amqp:resource-limit-exceeded", description: "idle timeout expired" },
    });
    expect(c.state()).toBe("closing");
    c.send({ type: "SOCKET_CLOSED" });
    expect(c.state()).toBe("done");
  });

  it.each([
    ["KICK", "closed by an administrator"],
    ["SHUTDOWN", "the gateway is shutting down"],
  ])("%s closes with amqp:connection:forced", (type, description) => {
    const c = serving();
    c.send({ type });
    expect(c.emitted.at(-1)).toEqual({
      type: "close_connection",
      error: { condition: "amqp:connection:forced", description },
    });
    expect(c.state()).toBe("closing");
    // A client that never answers the close is let go.
    c.clock.increment(2_000);
    expect(c.state()).toBe("done");
  });

  it("a protocol error while serving is a close with its condition", () => {
    const c = serving();
    c.send({ type: "PROTOCOL_ERROR", error: { condition: "amqp:connection:framing-error", description: "too big" } });
    expect(c.emitted.at(-1)).toEqual({
      type: "close_connection",
      error: { condition: "amqp:connection:framing-error", description: "too big" },
    });
  });
});

describe("amqpSenderLink and amqpReceiverLink", () => {
  const link = (m: typeof amqpSenderLinkMachine | typeof amqpReceiverLinkMachine) => run(m, { detachGraceMs: 5_000 });

  it.each([amqpSenderLinkMachine, amqpReceiverLinkMachine])(
    "%#: resolve, attach, flow; a client detach ends it",
    (m) => {
      const l = link(m);
      expect(l.types()).toEqual(["resolve"]);
      l.send({ type: "RESOLVED", address: "orders.eu" });
      expect(l.types()).toEqual(["resolve", "attach", "flow"]);
      expect(l.emitted[1]).toEqual({ type: "attach", address: "orders.eu" });
      l.send({ type: "REMOTE_DETACH" });
      expect(l.state()).toBe("done");
      expect(l.types().at(-1)).toBe("release");
    },
  );

  it.each([amqpSenderLinkMachine, amqpReceiverLinkMachine])("%#: a refused attach is answered and released", (m) => {
    const l = link(m);
    const error = { condition: "amqp:invalid-field", description: "bad" };
    l.send({ type: "REFUSED", error });
    expect(l.emitted.slice(1)).toEqual([{ type: "refuse", error }, { type: "release" }]);
    expect(l.state()).toBe("done");
  });

  it.each([amqpSenderLinkMachine, amqpReceiverLinkMachine])(
    "%#: a fault detaches with its error and waits for the client's detach, within a grace",
    (m) => {
      const l = link(m);
      l.send({ type: "RESOLVED", address: "x" });
      const error = { condition: "amqp:link:message-size-exceeded", description: "too big" };
      l.send({ type: "FAULT", error });
      expect(l.emitted.at(-1)).toEqual({ type: "detach", error });
      expect(l.state()).toBe("detaching");
      l.clock.increment(5_000);
      expect(l.state()).toBe("done");
    },
  );

  it.each([amqpSenderLinkMachine, amqpReceiverLinkMachine])(
    "%#: NATS down holds the flow, NATS up opens it again",
    (m) => {
      const l = link(m);
      l.send({ type: "RESOLVED", address: "x" });
      l.send({ type: "NATS_DOWN" });
      expect(l.types().at(-1)).toBe("hold");
      l.send({ type: "NATS_UP" });
      expect(l.types().at(-1)).toBe("flow");
    },
  );

  it("a receiver link drains and returns to flowing", () => {
    const l = link(amqpReceiverLinkMachine);
    l.send({ type: "RESOLVED", address: "x" });
    l.send({ type: "DRAIN" });
    expect(l.types().at(-1)).toBe("drain");
    expect(l.actor.getSnapshot().matches({ active: { credit: "draining" } })).toBe(true);
    l.send({ type: "DRAINED" });
    expect(l.actor.getSnapshot().matches({ active: { credit: "flowing" } })).toBe(true);
  });
});

describe("amqpSession", () => {
  const session = (maxLinks = 3) => run(amqpSessionMachine, { channel: 1, maxLinks, endGraceMs: 5_000 });
  const links = (s: ReturnType<typeof session>) => s.actor.getSnapshot().context.links;

  it("counts the links attached and detached on it", () => {
    const s = session();
    s.send({ type: "LINK_ATTACHED", handle: 0 });
    s.send({ type: "LINK_ATTACHED", handle: 1 });
    s.send({ type: "LINK_DETACHED" });
    expect(links(s)).toBe(1);
    expect(s.state()).toBe("begun");
    expect(s.emitted).toEqual([]);
  });

  it("the client's end: its links are told at once; the session is over once they are all gone", () => {
    const s = session();
    s.send({ type: "LINK_ATTACHED", handle: 0 });
    s.send({ type: "LINK_ATTACHED", handle: 1 });
    s.send({ type: "REMOTE_END" });
    expect(s.types()).toEqual(["detach_links"]);
    expect(s.state()).toBe("ending");
    s.send({ type: "LINK_DETACHED" });
    expect(s.state()).toBe("ending");
    s.send({ type: "LINK_DETACHED" });
    expect(s.state()).toBe("done");
    expect(s.types()).toEqual(["detach_links", "release"]);
  });

  it("the client's end on a session without links is over at once", () => {
    const s = session();
    s.send({ type: "REMOTE_END" });
    expect(s.state()).toBe("done");
    expect(s.types()).toEqual(["detach_links", "release"]);
  });

  it("one link more than handle-max + 1 ends the session amqp:resource-limit-exceeded and takes its links", () => {
    const s = session(2);
    s.send({ type: "LINK_ATTACHED", handle: 0 });
    s.send({ type: "LINK_ATTACHED", handle: 1 });
    s.send({ type: "LINK_ATTACHED", handle: 1 });
    expect(s.emitted).toEqual([
      {
        type: "end",
        error: {
          condition: "amqp:resource-limit-exceeded",
          description: "at most 2 links on one session (handle-max 1)",
        },
      },
      { type: "detach_links" },
    ]);
    expect(s.state()).toBe("ending");
    // The client answers the end and its links go: over.
    s.send({ type: "REMOTE_END" });
    for (let i = 0; i < 3; i++) s.send({ type: "LINK_DETACHED" });
    expect(s.state()).toBe("done");
  });

  it("a handle above handle-max is a framing error of the connection (part 2, 2.7.2)", () => {
    const s = session(4);
    s.send({ type: "LINK_ATTACHED", handle: 4 });
    expect(s.emitted).toEqual([
      {
        type: "close_connection",
        error: {
          condition: "amqp:connection:framing-error",
          description: "attach on handle 4, above the session's handle-max 3",
        },
      },
    ]);
    s.send({ type: "CONNECTION_CLOSED" });
    expect(s.state()).toBe("done");
  });

  it("an end the client never answers, or a link that never lets go, is not waited for past the grace", () => {
    const s = session(1);
    s.send({ type: "LINK_ATTACHED", handle: 0 });
    s.send({ type: "LINK_ATTACHED", handle: 0 });
    s.clock.increment(4_999);
    expect(s.state()).toBe("ending");
    s.clock.increment(1);
    expect(s.state()).toBe("done");
    expect(s.types().at(-1)).toBe("release");
  });

  it("an attach that crosses the client's end is told to go too", () => {
    const s = session();
    s.send({ type: "REMOTE_END" });
    expect(s.state()).toBe("done");
    const t = session();
    t.send({ type: "LINK_ATTACHED", handle: 0 });
    t.send({ type: "REMOTE_END" });
    t.send({ type: "LINK_ATTACHED", handle: 1 });
    expect(t.types()).toEqual(["detach_links", "detach_links"]);
    t.send({ type: "LINK_DETACHED" });
    t.send({ type: "LINK_DETACHED" });
    expect(t.state()).toBe("done");
  });

  it("the connection closing ends the session in any state, without a word to the client", () => {
    for (const before of [[], [{ type: "REMOTE_END" }], [{ type: "LINK_ATTACHED", handle: 0 }]]) {
      const s = session();
      for (const e of before) s.send(e);
      s.send({ type: "CONNECTION_CLOSED" });
      expect(s.state()).toBe("done");
      expect(s.types()).not.toContain("end");
    }
  });
});
