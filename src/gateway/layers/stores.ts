// What the gateway keeps in NATS for its clients: the accounts they belong to (and the
// gateway's JetStream handles there), the MQTT store and the operator's bound streams,
// and the MQTT sessions' KV bucket. Built in that order on the bridge; released before it.
import { Context, Effect, Layer } from "effect";
import { AccountServices } from "../../actors/accountServices.js";
import { AccountResolver } from "../../actors/accounts.js";
import { Bindings } from "../../actors/bindings.js";
import { MessageStore } from "../../actors/messageStore.js";
import { KvSessionStore } from "../../actors/mqtt/kvSessionStore.js";
import { RetainedMessages } from "../../actors/mqtt/retained.js";
import { SessionSweeper } from "../../actors/mqtt/sessionSweeper.js";
import { sweepActor } from "../../actors/mqtt/sweepActor.js";
import { Actors, Telemetry } from "./actors.js";
import { Nats } from "./nats.js";
import { Settings } from "./settings.js";

export class Accounts extends Context.Service<
  Accounts,
  { readonly resolver: AccountResolver; readonly services: AccountServices }
>()("mq-gateway/Accounts") {
  static readonly layer = Layer.effect(
    Accounts,
    Effect.gen(function* () {
      const { config, log } = yield* Settings;
      const { bridge, core } = yield* Nats;
      const { readApiWaitingFrom } = yield* Telemetry;
      // Said once per user: what that client cannot do, and what would tell its account (docs/decisions/client-account.md).
      const unknownAccountOf = new Set<string>();
      const resolver = new AccountResolver(() => config().routing, {
        gatewayAccounts: () => Object.keys(config().gateway_users),
        gatewayConnection: async (account) => (await services.jetstream(account)).lease.nats,
        learnt: (username, account, via) =>
          log.debug({ user: username ?? null, account, via }, "client account learnt"),
        unknown: (username) => {
          const user = username ?? "";
          if (
            Object.keys(config().gateway_users).length === 0 ||
            unknownAccountOf.has(user) ||
            unknownAccountOf.size >= 1_000
          )
            return;
          unknownAccountOf.add(user);
          log.warn(
            { user: username ?? null },
            "the NATS account of this user is unknown (nats-server did not name it at CONNECT, the user may not ask $SYS.REQ.USER.INFO, and no gateway user's $SYS.REQ.ACCOUNT.PING.CONNZ lists it): what the gateway keeps for it in its account (the MQTT store's copies of its QoS 1/2 publishes, its session, its retained messages) fails; name its account in routing (docs/accounts.md)",
          );
        },
      });
      const services: AccountServices = new AccountServices(bridge, core, config, log, () =>
        resolver.resolve(core.nats, undefined),
      );
      readApiWaitingFrom(() => services.apiWaiting());
      return { resolver, services };
    }),
  );
}

export class Stores extends Context.Service<
  Stores,
  { readonly messages: MessageStore; readonly bindings: Bindings; readonly retained: RetainedMessages }
>()("mq-gateway/Stores") {
  static readonly layer = Layer.effect(
    Stores,
    Effect.gen(function* () {
      const { config, log } = yield* Settings;
      const { core } = yield* Nats;
      const { services } = yield* Accounts;
      const messages = new MessageStore(services, config, log);
      const bindings = new Bindings(log, async (account) =>
        account === null ? core.nats : (await services.jetstream(account)).lease.nats,
      );
      yield* Effect.promise(() => bindings.load(config().bindings));
      // The gateway's own streams that exist with fewer replicas than wanted are named at
      // start (streamReplicas.ts): a fiber each, interrupted if the gateway stops first.
      const startAccounts = Object.keys(config().gateway_users);
      for (const account of startAccounts.length > 0 ? startAccounts : [""]) {
        yield* Effect.forkScoped(
          Effect.promise(() =>
            services
              .reportReplicas(account)
              .catch((e: Error) => log.debug({ account, err: e.message }, "replicas not checked")),
          ),
        );
      }
      return { messages, bindings, retained: new RetainedMessages(services) };
    }),
  );
}

export class Sessions extends Context.Service<Sessions, { readonly store: KvSessionStore }>()("mq-gateway/Sessions") {
  static readonly layer = Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const { config, log } = yield* Settings;
      const { supervisor, directory } = yield* Actors;
      const { metrics } = yield* Telemetry;
      const { services } = yield* Accounts;
      const { messages, bindings } = yield* Stores;
      const id = config().id;
      const store = yield* KvSessionStore.scoped(services);
      const sweepEvery = config().mqtt.session_sweep_interval;
      if (sweepEvery > 0) {
        const sweeper = new SessionSweeper(
          services,
          store,
          directory,
          id,
          sweepEvery,
          log,
          (account) => [
            ...(messages.enabled() ? [messages.streamName()] : []),
            ...bindings.of(account).map((b) => b.stream),
          ],
          (account, n) => metrics.orphanConsumersRemoved(account, n),
        );
        const accounts = () => new Set([...store.accounts(), ...Object.keys(config().gateway_users)]);
        supervisor.spawn("sessionSweeper", "sessionSweeper", sweepActor(sweeper, sweepEvery, accounts));
      }
      return { store };
    }),
  );
}
