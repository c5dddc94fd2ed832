import type { AnyEventObject, AnyStateMachine, EventObject } from "xstate";
import { type ConnectRequest, mqttConnectionMachine, termsOf } from "../../machines/mqttConnection.js";
import { mqttSessionMachine } from "../../machines/mqttSession.js";
import { Broken } from "../model.js";
import {
  type Effect,
  ENDED,
  post,
  type SystemModel,
  type SystemView,
  send,
  start,
  systemInvariant,
  type WorldEvent,
  world,
} from "../system.js";

/**
 * One client id, two connections of it on one gateway, their sessions, the sessions
 * bucket and the session directory, wired as the edges wire them:
 *
 * - C emits `open_session`: the client registry takes the connection (`ClientRegistry.add`),
 *   the connection it displaces hears TAKEN_OVER at once (`takeOver()`), and its session
 *   actor S starts (connection.ts `openSession`);
 * - S emits `claim`: CLAIMED comes once every earlier session of the id has ended
 *   (sessionDirectory.ts), or at once with the rule the directory had before;
 * - S emits `load`: the store answers LOADED with what it holds when it reads;
 * - S emits `ready`: with an expiry, the record is taken (an unconditional write) and then
 *   C hears SESSION_READY (sessionActor.ts);
 * - C emits `detach_session`: S hears DETACH; S's `save_detached` / `remove` / `discard`
 *   are the store's writes, one at a time per session (sessionWriter.ts), each conditional
 *   on the revision that session saw; a write that finds a newer record stops the writer
 *   and tells C TAKEN_OVER.
 */
type Id = 1 | 2;
const IDS: readonly Id[] = [1, 2];
const other = (i: Id): Id => (i === 1 ? 2 : 1);
type Write = "take" | "take present" | "save" | "remove" | "discard";

export interface ClientIdWorld {
  /** The bucket's key: its last revision, and which session's write it holds (0: none). */
  readonly store: { readonly rev: number; readonly holder: 0 | Id };
  /** Per session (index 1, 2): the revision its writer writes on (null: unconditionally). */
  readonly seen: readonly (number | null)[];
  /** What its read found (the revision a resume writes on). */
  readonly loaded: readonly (number | null)[];
  /** Its writer found a newer record: it writes nothing more. */
  readonly movedOn: readonly boolean[];
  /** Its machine ended: its writer sends nothing more (what it asked for and did not send is dropped). */
  readonly closed: readonly boolean[];
  /** Its writes not yet sent: its writer sends the next once the one before it was answered. */
  readonly writes: readonly (readonly Write[])[];
  /** Its writer has a write on the wire or an answer still to hear. */
  readonly writing: readonly boolean[];
  /** What the gateway asked the store and it has not served yet, in the order asked (one NATS connection per account). */
  readonly wire: ReadonlyArray<{ readonly by: Id; readonly op: Write | "read" }>;
  /** Sessions in the order they claimed the client id; those told CLAIMED are not in `waiting`. */
  readonly claims: readonly Id[];
  readonly waiting: readonly Id[];
  /** The connection the client registry holds for the id (0: none). */
  readonly registered: 0 | Id;
  /** Connections in the order they opened their sessions. */
  readonly opened: readonly Id[];
  /** Sessions that wrote the store successfully. */
  readonly wrote: readonly boolean[];
}

const initialWorld: ClientIdWorld = {
  store: { rev: 0, holder: 0 },
  seen: [null, null, null],
  loaded: [null, null, null],
  movedOn: [false, false, false],
  closed: [false, false, false],
  writes: [[], [], []],
  writing: [false, false, false],
  wire: [],
  claims: [],
  waiting: [],
  registered: 0,
  opened: [],
  wrote: [false, false, false],
};

const at = <T>(list: readonly T[], i: Id, value: T): T[] => list.map((v, k) => (k === i ? value : v));
const C = (i: Id) => `C${i}`;
const S = (i: Id) => `S${i}`;

export type DirectoryRule = "after the earlier sessions ended" | "at once";

export interface ClientIdOptions {
  /** The directory's rule for CLAIMED: the gateway's, or the old one (issue 12's race). */
  readonly directory?: DirectoryRule;
  /** Variants a test breaks on purpose. */
  readonly connection?: AnyStateMachine;
  readonly session?: AnyStateMachine;
  /** A session's writer goes on after its machine ended (broken on purpose: the code before it stopped). */
  readonly writerOutlivesSession?: boolean;
  /** The second connection starts clean (Clean Start 1) instead of resuming the session. */
  readonly secondStartsClean?: boolean;
  /** The store may also never answer a request (broken on purpose: the real client times out). */
  readonly storeMayHang?: boolean;
}

const request = (cleanStart: boolean): ConnectRequest => ({
  protocolVersion: 5,
  clientId: "a",
  keepaliveSec: 0,
  cleanStart,
  sessionExpirySec: 60,
  will: { topic: "will", payload: new Uint8Array(), qos: 1, retain: false, delayMs: 5_000 },
});
const EXPIRY = 60;

export function mqttClientIdModel(options: ClientIdOptions = {}): SystemModel<ClientIdWorld> {
  const rule = options.directory ?? "after the earlier sessions ended";
  const connection = options.connection ?? mqttConnectionMachine;
  const session = options.session ?? mqttSessionMachine;
  const connectionSpec = {
    machine: connection,
    input: { connectTimeoutMs: 10_000, maxKeepaliveSec: 0 },
    abstract: (c: Record<string, unknown>) => [c.sessionExpirySec, c.natsUp],
  };
  const cleanStart = (i: Id) => i === 2 && options.secondStartsClean === true;
  const sessionSpec = (i: Id) => ({
    machine: session,
    input: { cleanStart: cleanStart(i), expirySec: EXPIRY },
    startsLater: true,
    abstract: (c: Record<string, unknown>) => [c.expirySec, c.found],
  });

  /** Sessions that claimed before `i` and have not ended. */
  const earlierOpen = (v: SystemView<ClientIdWorld>, i: Id): Id[] => {
    const claims = v.world.claims;
    return claims.slice(0, claims.indexOf(i)).filter((j) => !v.ended(S(j)));
  };
  const claimed = (v: SystemView<ClientIdWorld>): Effect<ClientIdWorld>[] => {
    const ready = v.world.waiting.filter((j) => earlierOpen(v, j).length === 0);
    if (ready.length === 0) return [];
    return [
      world((w) => ({ ...w, waiting: w.waiting.filter((j) => !ready.includes(j)) })),
      ...ready.map((j) => post<ClientIdWorld>(S(j), { type: "CLAIMED" })),
    ];
  };

  const routeConnection = (i: Id, e: EventObject, v: SystemView<ClientIdWorld>): Effect<ClientIdWorld>[] => {
    switch (e.type) {
      case "acquire_nats":
        return [post(C(i), { type: "NATS_ACQUIRED", account: "A", natsUp: true })];
      case "open_session": {
        const previous = v.world.registered;
        return [
          world((w) => ({ ...w, registered: i, opened: [...w.opened, i] })),
          ...(previous !== 0 && previous !== i && v.live(C(previous))
            ? [send<ClientIdWorld>(C(previous), { type: "TAKEN_OVER", resumed: !cleanStart(i) })]
            : []),
          // SessionActor's input: the claim it makes first is granted at once when no earlier
          // session of the id is open (under the old rule, always).
          start(S(i), {
            cleanStart: cleanStart(i),
            expirySec: EXPIRY,
            claimedAtStart: rule === "at once" || v.world.claims.every((j) => v.ended(S(j))),
          }),
        ];
      }
      case "detach_session":
        return [send(S(i), { type: "DETACH", expirySec: (e as unknown as { expirySec: number }).expirySec })];
      case "publish_will":
        return [post(C(i), { type: "WILL_DONE" })];
      case ENDED.type:
        // cleanup(): the registry lets go of the connection (only if it is still the one it holds).
        return [world((w) => (w.registered === i ? { ...w, registered: 0 } : w))];
      default:
        return [];
    }
  };

  const routeSession = (i: Id, e: EventObject, v: SystemView<ClientIdWorld>): Effect<ClientIdWorld>[] => {
    // SessionWriter: one write at a time; the next goes out once the one before it was answered.
    const queue = (op: Write) =>
      world<ClientIdWorld>((w) =>
        w.closed[i]
          ? w
          : w.writing[i]
            ? { ...w, writes: at(w.writes, i, [...w.writes[i]!, op]) }
            : { ...w, writing: at(w.writing, i, true), wire: [...w.wire, { by: i, op }] },
      );
    const ask = (op: Write | "read") => world<ClientIdWorld>((w) => ({ ...w, wire: [...w.wire, { by: i, op }] }));
    switch (e.type) {
      case "claim": {
        const now =
          rule === "at once" ||
          earlierOpen({ ...v, world: { ...v.world, claims: [...v.world.claims, i] } }, i).length === 0;
        return [
          world((w) => ({ ...w, claims: [...w.claims, i], waiting: now ? w.waiting : [...w.waiting, i] })),
          // A session that knew at its start went on without CLAIMED (SessionActor.claimed).
          ...(now && v.inState(S(i), "claiming") ? [post<ClientIdWorld>(S(i), { type: "CLAIMED" })] : []),
        ];
      }
      case "load":
        return [ask("read")];
      case "discard":
        // session.discard(): the store's remove, outside the writer.
        return [ask("discard")];
      case "resume":
        return [world((w) => ({ ...w, seen: at(w.seen, i, w.loaded[i]!) })), post(S(i), { type: "RESUMED" })];
      case "ready": {
        const present = (e as unknown as { sessionPresent: boolean }).sessionPresent;
        // takeRecord(): the writer forgets the revision; SESSION_READY once the record is written.
        return [world((w) => ({ ...w, seen: at(w.seen, i, null) })), queue(present ? "take present" : "take")];
      }
      case "refuse":
        return [send(C(i), { type: "SESSION_REFUSED", reason: "store" })];
      case "save_detached":
        return [queue("save")];
      case "remove":
        return [queue("remove")];
      case ENDED.type:
        // The session's `done`: its writer sends nothing more, and the directory lets the
        // next claimant of the id go on.
        return [
          ...(options.writerOutlivesSession
            ? []
            : [world<ClientIdWorld>((w) => ({ ...w, closed: at(w.closed, i, true), writes: at(w.writes, i, []) }))]),
          ...claimed(v),
        ];
      default:
        return [];
    }
  };

  /**
   * The store serves the oldest request on the wire. A read answers with what the key
   * holds now; a discard removes it unconditionally; any other write is skipped once the
   * writer moved on, and otherwise lands only on the revision the session saw (null:
   * unconditionally). The answer is on its way back (`post`): its promise settles later.
   */
  const serve = (v: SystemView<ClientIdWorld>): WorldEvent<ClientIdWorld> => {
    const w = v.world;
    const { by: i, op } = w.wire[0]!;
    const wire = w.wire.slice(1);
    const name = `store serves S${i}'s ${op}`;
    if (op === "read") {
      const found = { exists: w.store.holder !== 0, expired: false };
      return {
        name,
        effects: [
          world<ClientIdWorld>(() => ({ ...w, wire, loaded: at(w.loaded, i, w.store.rev) })),
          post(S(i), { type: "LOADED", found }),
        ],
      };
    }
    const rev = w.store.rev + 1;
    const expected = w.seen[i];
    const conflict = expected !== null && expected !== w.store.rev;
    let next: ClientIdWorld = { ...w, wire };
    let movedOn = false;
    if (op === "discard") next = { ...next, store: { rev, holder: 0 }, wrote: at(w.wrote, i, true) };
    else if (w.movedOn[i]) {
      // run() returns at once: nothing is written.
    } else if (conflict) {
      next = { ...next, movedOn: at(w.movedOn, i, true) };
      movedOn = true;
    } else
      next = {
        ...next,
        store: { rev, holder: op === "remove" ? 0 : i },
        seen: op === "remove" ? w.seen : at(w.seen, i, rev),
        wrote: at(w.wrote, i, true),
      };
    return { name, effects: [world(() => next), post("answers", { type: op, by: i, movedOn })] };
  };

  /** The store fails the oldest request (a timeout, JetStream away): nothing is written, the promise rejects. */
  const fail = (v: SystemView<ClientIdWorld>): WorldEvent<ClientIdWorld> => {
    const w = v.world;
    const { by: i, op } = w.wire[0]!;
    const wire = w.wire.slice(1);
    return {
      name: `store fails S${i}'s ${op}`,
      effects: [
        world<ClientIdWorld>(() => ({ ...w, wire })),
        op === "read"
          ? post(S(i), { type: "LOAD_FAILED", reason: "timeout", waitable: true })
          : post("answers", { type: op, by: i, movedOn: false }),
      ],
    };
  };

  /** A write's promise settles: who waited hears of it, and the writer sends its next write. */
  const answered = (e: EventObject): Effect<ClientIdWorld>[] => {
    const { type, by: i, movedOn } = e as unknown as { type: Write; by: Id; movedOn: boolean };
    const answer: Record<Write, AnyEventObject> = {
      take: { type: "SESSION_READY", sessionPresent: false },
      "take present": { type: "SESSION_READY", sessionPresent: true },
      save: { type: "SAVED" },
      remove: { type: "REMOVED" },
      discard: { type: "DISCARDED" },
    };
    const next =
      type === "discard"
        ? []
        : [
            world<ClientIdWorld>((w) => {
              const [first, ...rest] = w.writes[i]!;
              return first === undefined || w.closed[i]
                ? { ...w, writing: at(w.writing, i, false) }
                : { ...w, writes: at(w.writes, i, rest), wire: [...w.wire, { by: i, op: first }] };
            }),
          ];
    return [
      ...next,
      // onMovedOn: another connection wrote the session; this one lost it.
      ...(movedOn ? [send<ClientIdWorld>(C(i), { type: "TAKEN_OVER" })] : []),
      send(type === "take" || type === "take present" ? C(i) : S(i), answer[type]),
    ];
  };

  return {
    kind: "system",
    name: `one client id, two connections (the second ${options.secondStartsClean ? "starts clean" : "resumes"}; directory: CLAIMED ${rule})`,
    bound:
      "two connections of one client id (v5, expiry 60 s, a will after 5 s; the first resumes, the second resumes or starts clean), each connecting, closing its socket or sending DISCONNECT with expiry 0 at any point; their sessions; one store key (written or removed, conditionally on the revision each session saw), each request served or failed in the order asked; every answer in any order, each session's writes in its order; timers fire at any point",
    actors: { C1: connectionSpec, S1: sessionSpec(1), C2: connectionSpec, S2: sessionSpec(2) },
    world: initialWorld,
    route: (actor, e, v) => {
      const i = Number(actor.slice(1)) as Id;
      return actor.startsWith("C") ? routeConnection(i, e, v) : routeSession(i, e, v);
    },
    handlers: { answers: (e) => answered(e) },
    events: (v) => {
      const out: WorldEvent<ClientIdWorld>[] = [];
      for (const i of IDS) {
        if (v.inState(C(i), "awaitingConnect"))
          out.push({
            name: `client ${i} connects`,
            effects: [send(C(i), { type: "CONNECT", terms: termsOf(request(cleanStart(i))) })],
          });
        else if (v.live(C(i)) && !v.inState(C(i), "willPending") && !v.inState(C(i), "publishingWill"))
          out.push({ name: `client ${i}'s socket closes`, effects: [send(C(i), { type: "SOCKET_CLOSED" })] });
        if (i === 1 && v.inState(C(i), "session.serving"))
          out.push({
            name: "client 1 sends DISCONNECT with expiry 0",
            effects: [send(C(i), { type: "DISCONNECT", reasonCode: 0, sessionExpirySec: 0 })],
          });
      }
      if (v.world.wire.length > 0) {
        out.push(serve(v), fail(v));
        const { by, op } = v.world.wire[0]!;
        if (options.storeMayHang)
          out.push({
            name: `store never answers S${by}'s ${op}`,
            effects: [world((w) => ({ ...w, wire: w.wire.slice(1) }))],
          });
      }
      return out;
    },
    describeWorld: (w) =>
      `store ${w.store.holder ? `S${w.store.holder}'s` : "no"} record at rev ${w.store.rev}${w.wire.length ? `, asked ${w.wire.map((x) => `S${x.by} ${x.op}`).join(", ")}` : ""}`,
    invariants: [
      // [MQTT-3.1.4-3] a second connection of the id takes the session over; the two never act on it at once.
      systemInvariant("one live session per client id", null, (_: null, step) => {
        const live = IDS.filter((i) => step.after.live(S(i)) && !step.after.inState(S(i), "claiming"));
        return live.length > 1
          ? new Broken(`S1 in ${label(step.after, "S1")} and S2 in ${label(step.after, "S2")} at once`)
          : null;
      }),
      systemInvariant(
        "a session reads the store only after every earlier session of the id ended",
        null,
        (_: null, step) => {
          const e = step.event;
          const asked = step.before?.world.wire[0];
          if (e.kind !== "world" || !e.name.startsWith("store serves") || asked?.op !== "read") return null;
          const i = asked.by;
          const open = earlierOpen(step.before!, i);
          return open.length
            ? new Broken(
                `S${i} read the store while ${open.map((j) => `S${j} was in ${label(step.before!, S(j))}`).join(", ")}`,
              )
            : null;
        },
      ),
      systemInvariant(
        "the old connection's writes never land over or remove what the new one wrote",
        null,
        (_: null, step) => {
          const asked = step.before?.world.wire[0];
          if (
            step.event.kind !== "world" ||
            !step.event.name.startsWith("store serves") ||
            !asked ||
            asked.op === "read"
          )
            return null;
          const i = asked.by;
          const j = other(i);
          const claims = step.before!.world.claims;
          const older = claims.indexOf(i) < claims.indexOf(j);
          const landed = step.after.world.store.rev > step.before!.world.store.rev;
          const op = asked.op;
          return older && landed && op !== "discard" && step.before!.world.wrote[j]
            ? new Broken(`S${i}'s ${op} landed on what S${j} wrote`)
            : null;
        },
      ),
      systemInvariant("a will is published at most once per connection", [0, 0, 0], (n: number[], step) => {
        let next = n;
        for (const x of step.emitted)
          if (x.event.type === "publish_will")
            next = at(next, Number(x.actor.slice(1)) as Id, next[Number(x.actor.slice(1))]! + 1);
        const twice = IDS.find((i) => next[i]! > 1);
        return twice ? new Broken(`C${twice} published its will twice`) : next;
      }),
      // [MQTT-3.1.3-9] a new connection to the session before the will's delay passed: no will
      // (a clean start ends the session instead, and the will goes then).
      systemInvariant(
        "a delayed will is never published after a newer connection of the id resumed the session",
        null,
        (_: null, step) => {
          for (const x of step.emitted) {
            if (x.event.type !== "publish_will") continue;
            const i = Number(x.actor.slice(1)) as Id;
            const j = other(i);
            const opened = step.after.world.opened;
            if (opened.indexOf(j) > opened.indexOf(i) && !cleanStart(j))
              return new Broken(`C${i}'s will after C${j} opened its session to resume it`);
          }
          return null;
        },
      ),
    ],
    progress: [
      { name: "can always still end (no deadlock)", after: () => true, using: () => true },
      {
        name: "a session whose connection ended ends on its timers and the store's answers",
        after: (step) => IDS.some((i) => step.after.ended(C(i)) && step.after.live(S(i))),
        using: (e) => e.kind === "world" && e.name.startsWith("store"),
        reach: (v) => IDS.every((i) => !(v.ended(C(i)) && v.live(S(i)))),
      },
    ],
  };
}

function label(v: SystemView<unknown>, actor: string): string {
  const s = v.snapshot(actor);
  if (!s) return "-";
  return dotted(s.value);
}

/** A state value as a path: "loading.reading". */
function dotted(value: unknown): string {
  if (typeof value !== "object" || value === null) return String(value);
  const [key, child] = Object.entries(value)[0] ?? [];
  return key === undefined ? "" : `${key}.${dotted(child)}`;
}
