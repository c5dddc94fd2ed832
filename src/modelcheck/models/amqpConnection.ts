import type { AnyStateMachine } from "xstate";
import { amqpConnectionMachine } from "../../machines/amqpConnection.js";
import {
  atMost,
  Broken,
  canAlwaysEnd,
  emitsWhere,
  fields,
  inState,
  invariant,
  type Model,
  neverAfter,
  onlyAfter,
} from "../model.js";

const forced = (step: Parameters<typeof emitsWhere>[0]) =>
  emitsWhere<{ type: string; error?: { condition: string } }>(
    step,
    "close_connection",
    (e) => e.error?.condition === "amqp:connection:forced",
  );

/** The AMQP connection with a client that may send anything, NATS that may accept or refuse, an operator and a lame duck. */
export const amqpConnectionModel = (machine: AnyStateMachine = amqpConnectionMachine): Model => ({
  machine,
  input: { handshakeTimeoutMs: 10_000, idleTimeoutMs: 60_000, closeGraceMs: 2_000 },
  bound:
    "protocol header with and without SASL or mismatched, one PLAIN login, a SASL refusal before NATS, NATS accept/refuse (auth or not), a limit refusal, open, close, 5 other events; every order, timers fire at any point",
  events: [
    { type: "HEADER", sasl: true },
    { type: "HEADER", sasl: false },
    { type: "HEADER_MISMATCH", description: "AMQP 0-9-1" },
    { type: "AUTHENTICATE", login: { credentials: { user: "u", pass: "p" }, username: "u", mechanism: "PLAIN" } },
    { type: "SASL_REFUSED", reason: "malformed PLAIN" },
    { type: "NATS_READY", account: "A" },
    { type: "NATS_REFUSED", auth: true, reason: "bad password" },
    { type: "NATS_REFUSED", auth: false, reason: "no servers" },
    { type: "LIMIT_REFUSED", error: { condition: "amqp:resource-limit-exceeded", description: "account full" } },
    { type: "OPENED", containerId: "c1" },
    { type: "ACTIVITY" },
    { type: "REMOTE_CLOSE" },
    { type: "PROTOCOL_ERROR", error: { condition: "amqp:decode-error", description: "bad frame" } },
    { type: "SOCKET_CLOSED" },
    { type: "KICK" },
    { type: "SHUTDOWN" },
  ],
  invariants: [
    onlyAfter(
      "serves only a login NATS accepted",
      "serve",
      (step) => step.event.type === "NATS_READY" && inState(step.before, "authenticating"),
    ),
    neverAfter(
      "a refused login is never served",
      "NATS refused the login",
      (step) => step.event.type === "NATS_REFUSED" && inState(step.before, "authenticating"),
      ["serve"],
    ),
    neverAfter(
      "a login SASL refused is never served",
      "SASL refused the login",
      (step) => step.event.type === "SASL_REFUSED" && inState(step.before, "saslExchange"),
      ["serve", "acquire_nats", "sasl_outcome"],
    ),
    neverAfter(
      "a login over a limit is never served",
      "a limit refused the login",
      (step) => step.event.type === "LIMIT_REFUSED" && inState(step.before, "authenticating"),
      ["serve"],
    ),
    invariant("a lost socket ends the connection at once", null, (_: null, step) =>
      step.event.type === "SOCKET_CLOSED" && step.before?.status === "active" && step.after.status !== "done"
        ? new Broken("still open after SOCKET_CLOSED")
        : null,
    ),
    atMost("closes once", "close"),
    invariant("nothing is served after leaving serving", false, (left: boolean, step) => {
      if (left && inState(step.after, "serving")) return new Broken(`back in serving (${step.event.type})`);
      return left || (inState(step.before, "serving") && !inState(step.after, "serving"));
    }),
    invariant("a kick or shutdown tells the client why", null, (_: null, step) =>
      (step.event.type === "KICK" || step.event.type === "SHUTDOWN") && inState(step.before, "serving") && !forced(step)
        ? new Broken(`${step.event.type} without amqp:connection:forced`)
        : null,
    ),
    invariant("the container id is the one opened", null, (_: null, step) =>
      step.event.type === "OPENED" &&
      step.after.status === "active" &&
      inState(step.after, "serving") &&
      fields(step.after.context).containerId !== "c1"
        ? new Broken("lost the container id")
        : null,
    ),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "never waits on the client without a timer",
      after: () => true,
      using: (e) => ["NATS_READY", "NATS_REFUSED", "LIMIT_REFUSED"].includes(e.type),
      reach: (s) => s.status === "done" || s.matches("serving"),
    },
  ],
});
