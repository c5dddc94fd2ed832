import { type MqttSessionEmitted, mqttSessionMachine, type SessionFound } from "../../machines/mqttSession.js";
import {
  atMost,
  Broken,
  canAlwaysEnd,
  count,
  emits,
  emitsWhere,
  inState,
  invariant,
  type Model,
  onlyAfter,
} from "../model.js";

type Ready = Extract<MqttSessionEmitted, { type: "ready" }>;

/** What the sessions bucket may hold: nothing, a live session, an expired one, one held by another gateway. */
const stored: SessionFound[] = [
  { exists: false, expired: false },
  { exists: true, expired: false },
  { exists: true, expired: true },
  { exists: true, expired: false, heldBy: "gw-2" },
];

const sessionModel = (cleanStart: boolean, expirySec: number): Model => ({
  machine: mqttSessionMachine,
  name: `mqttSession (${cleanStart ? "clean start" : "resume"}, expiry ${expirySec} s)`,
  input: { cleanStart, expirySec },
  bound:
    "the bucket holds nothing, a live, an expired or a taken session, or does not answer (read again) or refuses; every answer of the directory, the store and the other gateway (released or gone), the detach at any point with expiry 0 or 60 s; timers fire at any point",
  events: [
    { type: "CLAIMED" },
    ...stored.map((found) => ({ type: "LOADED", found })),
    { type: "LOAD_FAILED", reason: "timeout", waitable: true },
    { type: "LOAD_FAILED", reason: "permissions violation", waitable: false },
    { type: "OWNER_RELEASED" },
    { type: "OWNER_GONE" },
    { type: "DISCARDED" },
    { type: "RESUMED" },
    { type: "DETACH", expirySec: 0 },
    { type: "DETACH", expirySec: 60 },
    { type: "SAVED" },
    { type: "REMOVED" },
  ],
  invariants: [
    invariant("answers the connection once: ready or refused", 0, (n: number, step) => {
      const total = n + count(step, "ready") + count(step, "refuse");
      return total > 1 ? new Broken("answered twice") : total;
    }),
    // [MQTT-3.2.2-2], [MQTT-3.2.2-3]
    invariant("session present only when a live session was resumed", null as SessionFound | null, (found, step) => {
      const now =
        step.event.type === "LOADED" && (inState(step.before, "loading") || inState(step.before, "reloading"))
          ? (step.event as unknown as { found: SessionFound }).found
          : found;
      const present = emitsWhere<Ready>(step, "ready", (e) => e.sessionPresent);
      if (present && (cleanStart || !now?.exists || now.expired))
        return new Broken("sessionPresent for a session that was not there to resume");
      const absent = emitsWhere<Ready>(step, "ready", (e) => !e.sessionPresent);
      if (absent && !cleanStart && now?.exists && !now.expired) return new Broken("a live session was not resumed");
      return now;
    }),
    invariant(
      "a stale session is discarded before the client is served",
      { found: null as SessionFound | null, discard: false },
      (m, step) => {
        const found =
          step.event.type === "LOADED" && (inState(step.before, "loading") || inState(step.before, "reloading"))
            ? (step.event as unknown as { found: SessionFound }).found
            : m.found;
        const discard = m.discard || emits(step, "discard");
        const stale = found?.exists === true && (cleanStart || found.expired);
        return stale && emits(step, "ready") && !discard
          ? new Broken("served without discarding the stale session")
          : { found, discard };
      },
    ),
    // [MQTT-3.1.4-3] one session of a client id at a time: the store is read only once the
    // earlier session here was saved or removed (the directory says CLAIMED).
    onlyAfter(
      "the store is read only once the client id is claimed",
      "load",
      (step) => inState(step.before, "claiming") && step.event.type === "CLAIMED",
    ),
    invariant(
      "what another gateway left is read again after it let go",
      { released: false, reloaded: false },
      (m, step) => {
        const released = m.released || (inState(step.before, "takingOver") && step.event.type === "OWNER_RELEASED");
        const reloaded = m.reloaded || (released && emits(step, "load"));
        return released && !reloaded && emits(step, "ready")
          ? new Broken("served from what was read before the owner let go")
          : { released, reloaded };
      },
    ),
    invariant(
      "served only once the other gateway let go or timed out",
      { asked: false, released: false },
      (m, step) => {
        const asked = m.asked || emits(step, "ask_owner");
        const released =
          m.released ||
          (inState(step.before, "takingOver") &&
            (step.event.type === "OWNER_RELEASED" ||
              step.event.type === "OWNER_GONE" ||
              step.event.type.startsWith("xstate.after.")));
        return asked && !released && emits(step, "ready")
          ? new Broken("served while another gateway may still hold the session")
          : { asked, released };
      },
    ),
    onlyAfter("delivery stops before the session is saved or removed", "save_detached", (step) =>
      emits(step, "stop_delivery"),
    ),
    onlyAfter("delivery stops before the session is removed", "remove", (step) => emits(step, "stop_delivery")),
    // MQTT 5 3.14.2.2.2: the expiry the connection ends with decides (a DISCONNECT may change it).
    // MQTT 5 3.1.2.11.2: a session resumed with expiry 0 was in the store and ends with its connection.
    invariant(
      "the session ends as its expiry at detach says: kept, removed, or never stored",
      { detachedWith: null as number | null, resumed: false, held: false, removed: false },
      (m, step) => {
        const detachedWith =
          step.event.type === "DETACH" && step.before?.status === "active" && m.detachedWith === null
            ? (step.event as unknown as { expirySec: number }).expirySec
            : m.detachedWith;
        const resumed = m.resumed || emits(step, "resume");
        const removed = m.removed || emits(step, "remove");
        const stored = expirySec > 0 || resumed;
        // In the store by this connection's doing: resumed from it, or written at `ready`.
        const held = m.held || emits(step, "resume") || (expirySec > 0 && emits(step, "ready"));
        if (emits(step, "save_detached") && !(detachedWith !== null && detachedWith > 0))
          return new Broken(`kept with expiry ${detachedWith}`);
        if (emits(step, "remove") && !(detachedWith === 0 && stored))
          return new Broken(`removed (expiry ${detachedWith}, ${expirySec} at CONNECT, resumed: ${resumed})`);
        if (step.after.matches("ended" as never) && detachedWith === 0 && held && !removed)
          return new Broken("a stored session ended with its connection but was left in the store");
        return { detachedWith, resumed, held, removed };
      },
    ),
    atMost("refuses at most once", "refuse"),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "once detached, ends on its own timers",
      after: (step) => step.event.type === "DETACH" && step.before?.status === "active",
    },
  ],
});

export const mqttSessionModels = (): Model[] => [
  sessionModel(true, 0),
  sessionModel(false, 0),
  sessionModel(true, 3600),
  sessionModel(false, 3600),
];
