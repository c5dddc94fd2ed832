import fc from "fast-check";
import { expect } from "vitest";
import { CLIENTS, type Name, type Qos, type SessionModel, TOPICS } from "./sessionModel.js";
import { WAIT_MS, type World } from "./world.js";

type Command = fc.AsyncCommand<SessionModel, World>;

/** How often each kind of command ran (and resumed a session with subscriptions), to show what the runs covered. */
export const tally = new Map<string, number>();
const count = (what: string) => tally.set(what, (tally.get(what) ?? 0) + 1);

/**
 * Ends a client's current connection by `ending` (a DISCONNECT, a kick): waits for the
 * socket to close, checks the MQTT 5 reason the server gave, and ends it in the model.
 */
const ended = async (
  world: World,
  model: SessionModel,
  name: Name,
  ending: Promise<unknown>,
  reason: number | undefined,
) => {
  const old = world.retire(name)!;
  await ending;
  const code = await world.waitClosed(old, `${name}'s old connection to close`);
  if (reason !== undefined && old.version === 5) expect(code, `${name}: DISCONNECT reason`).toBe(reason);
  model.connectionEnded(name);
};

class Connect implements Command {
  constructor(
    readonly name: Name,
    readonly clean: boolean,
    readonly version: 4 | 5,
  ) {}
  check = () => true;
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    const old = model.clients[this.name].online ? world.retire(this.name) : undefined;
    const { present, owed } = model.connect(this.name, this.clean);
    for (const topic of model.clients[this.name].subs.keys()) world.opening(this.name, topic);
    const connack = await world.connect(this.name, this.clean, this.version);
    expect(connack.sessionPresent, `${this.name}: session present`).toBe(present);
    // [MQTT-3.1.4-3] the connection it took over is closed (MQTT 5: DISCONNECT 0x8E).
    if (old) {
      world.replaced(old);
      const code = await world.waitClosed(old, `${this.name}'s taken-over connection to close`);
      if (old.version === 5) expect(code, `${this.name}: takeover reason`).toBe(0x8e);
    }
    if (present && model.clients[this.name].subs.size > 0) {
      count("resume with subscriptions");
      await world.resumed(this.name, [...model.clients[this.name].subs.keys()]);
    }
    // What the stream kept for the session while it was away arrives now (at least once).
    if (owed.size > 0) count("resume with stored messages waiting");
    for (const [payload, qos] of owed) {
      const copies = (await world.delivered(payload, [this.name])).get(this.name)!;
      expect(copies[0], `${payload} QoS at ${this.name} after resuming`).toBe(qos);
    }
    if (old) count("takeover");
  }
  toString = () => `connect(${this.name}, ${this.clean ? "clean" : "resume"}, v${this.version})`;
}

class Subscribe implements Command {
  constructor(
    readonly name: Name,
    readonly topic: number,
    readonly qos: Qos,
  ) {}
  check = (m: Readonly<SessionModel>) => m.clients[this.name].online;
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    world.opening(this.name, this.topic);
    expect(await world.subscribe(this.name, this.topic, this.qos), "granted QoS").toBe(this.qos);
    model.subscribe(this.name, this.topic, this.qos);
  }
  toString = () => `subscribe(${this.name}, t${this.topic}, qos ${this.qos})`;
}

class Unsubscribe implements Command {
  constructor(
    readonly name: Name,
    readonly topic: number,
  ) {}
  check = (m: Readonly<SessionModel>) => m.clients[this.name].online && m.clients[this.name].subs.has(this.topic);
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    await world.unsubscribe(this.name, this.topic);
    model.unsubscribe(this.name, this.topic);
  }
  toString = () => `unsubscribe(${this.name}, t${this.topic})`;
}

class Publish implements Command {
  constructor(
    readonly name: Name,
    readonly topic: number,
    readonly qos: Qos,
  ) {}
  check = (m: Readonly<SessionModel>) => m.clients[this.name].online;
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    const payload = world.nextPayload();
    const want = model.publish(payload, this.topic, this.qos);
    const allowed = new Map(want);
    for (const name of CLIENTS) {
      const later = model.clients[name].waiting.get(payload);
      if (later !== undefined) allowed.set(name, later);
    }
    await world.publish(this.name, this.topic, this.qos, payload, allowed);
    const got = await world.delivered(payload, want.keys());
    for (const [name, qos] of want) {
      const copies = got.get(name) ?? [];
      // QoS 1 is at least once; 0 and 2 arrive exactly once here (nothing is lost on a quiet localhost).
      if (qos !== 1) expect(copies.length, `${payload} copies at ${name}`).toBe(1);
      expect(copies[0], `${payload} QoS at ${name}`).toBe(qos);
    }
  }
  toString = () => `publish(${this.name}, t${this.topic}, qos ${this.qos})`;
}

class Disconnect implements Command {
  constructor(
    readonly name: Name,
    readonly how: "clean" | "abrupt",
  ) {}
  check = (m: Readonly<SessionModel>) => m.clients[this.name].online;
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    if (this.how === "clean") await ended(world, model, this.name, world.disconnectCleanly(this.name), undefined);
    else {
      world.dropSocket(this.name);
      await ended(world, model, this.name, Promise.resolve(), undefined);
    }
  }
  toString = () => `disconnect(${this.name}, ${this.how})`;
}

/** The admin API's kick, by client id on the gateway's own scope. */
class Kick implements Command {
  constructor(readonly name: Name) {}
  check = (m: Readonly<SessionModel>) => m.clients[this.name].online;
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    const subject = `$MQG.admin.server.${world.shared.gatewayId}.kick`;
    const request = JSON.stringify({ client_id: world.clientId(this.name), account: "$G" });
    const reply = world.shared.nats().request(subject, request, { timeout: WAIT_MS });
    await ended(
      world,
      model,
      this.name,
      reply.then((m) => expect(m.json(), "kick reply").toMatchObject({ kicked: true })),
      0x98,
    );
  }
  toString = () => `kick(${this.name})`;
}

/** nats-server stops and starts again on the same port and store; the gateway reconnects, clients stay. */
class RestartNats implements Command {
  check = (m: Readonly<SessionModel>) => m.restarts === 0;
  async run(model: SessionModel, world: World) {
    count(this.toString().split("(")[0]!);
    model.restarts++;
    await world.shared.restartNats();
  }
  toString = () => "restartNats()";
}

const name = fc.constantFrom(...CLIENTS);
const topic = fc.integer({ min: 0, max: TOPICS - 1 });
const qos = fc.constantFrom<Qos>(0, 1, 2);

const connect = (n: fc.Arbitrary<Name>) =>
  fc.tuple(n, fc.boolean(), fc.constantFrom<4 | 5>(4, 5)).map(([c, clean, v]) => new Connect(c, clean, v));

const subscribe = (n: fc.Arbitrary<Name>) => fc.tuple(n, topic, qos).map(([c, t, q]) => new Subscribe(c, t, q));

/**
 * Each sequence starts with both clients connected (each with its own clean flag and
 * version) and subscribed once, so few of the random commands that follow go unused.
 */
export const opening = (): fc.Arbitrary<Command[]> =>
  fc.tuple(
    connect(fc.constant("a")),
    connect(fc.constant("b")),
    subscribe(fc.constant("a")),
    subscribe(fc.constant("b")),
  );

/**
 * The commands, weighted towards what exercises sessions (connects, subscriptions,
 * publishes); a NATS restart is costly and rare. Kick only where the admin API is on.
 */
export function commands(options: { admin: boolean; restarts: boolean }): Array<fc.Arbitrary<Command>> {
  const weighted: Array<fc.WeightedArbitrary<Command>> = [
    { weight: 30, arbitrary: connect(name) },
    { weight: 20, arbitrary: subscribe(name) },
    { weight: 10, arbitrary: fc.tuple(name, topic).map(([n, t]) => new Unsubscribe(n, t)) },
    { weight: 50, arbitrary: fc.tuple(name, topic, qos).map(([n, t, q]) => new Publish(n, t, q)) },
    {
      weight: 25,
      arbitrary: fc
        .tuple(name, fc.constantFrom<"clean" | "abrupt">("clean", "abrupt"))
        .map(([n, how]) => new Disconnect(n, how)),
    },
  ];
  if (options.admin) weighted.push({ weight: 10, arbitrary: name.map((n) => new Kick(n)) });
  if (options.restarts) weighted.push({ weight: 1, arbitrary: fc.constant(new RestartNats()) });
  return [fc.oneof(...weighted)];
}
