// How gateways of one account learn about each other's clients: this gateway's answer on
// `$MQG.alive.<id>` (with gateway users, each account's admin liveness actor answers
// instead, src/actors/admin/liveness.ts) and its claims when client ids connect here.
import { Context, Effect, FiberSet, Layer } from "effect";
import { ClaimAnnouncer } from "../../actors/claimAnnouncer.js";
import { announceClaims, answerLiveness } from "../../actors/liveness.js";
import { Actors } from "./actors.js";
import { Nats } from "./nats.js";
import { Settings } from "./settings.js";
import { Accounts } from "./stores.js";

export class Liveness extends Context.Service<Liveness, { readonly claims: ClaimAnnouncer }>()("mq-gateway/Liveness") {
  static readonly layer = Layer.effect(
    Liveness,
    Effect.gen(function* () {
      const { config, log } = yield* Settings;
      const { clients, directory } = yield* Actors;
      const { core } = yield* Nats;
      const { services } = yield* Accounts;
      const id = config().id;
      if (Object.keys(config().gateway_users).length === 0) {
        const liveness = answerLiveness({ nats: core.nats, id, clients, directory, log });
        yield* Effect.addFinalizer(() => Effect.sync(() => liveness.unsubscribe()));
      }
      // Each announcement is a fiber of this layer: one still waiting for its account's
      // connection when the gateway stops is interrupted, not left running. A claim that
      // cannot be sent (no connection in its account) is dropped, as it always was.
      const run = yield* FiberSet.makeRuntime<never, void, never>();
      const claims = new ClaimAnnouncer((account, payload) => {
        run(
          Effect.tryPromise(async () =>
            announceClaims((await services.jetstream(account)).lease.nats, id, payload),
          ).pipe(Effect.ignore),
        );
      });
      return { claims };
    }),
  );
}
