import { Effect, type Scope } from "effect";
import { adminKickMachine } from "../../machines/adminKick.js";
import type { ClientHandle, ClientRegistry } from "../clients.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { AdminScope } from "./subjects.js";

export type KickTarget = { readonly cid: number } | { readonly clientId: string; readonly account: string };

export type KickReply = { kicked: true; cid: number } | { kicked: false; reason: string };

/**
 * Reads a kick request in its scope. A malformed request is an error; a well-formed one
 * the scope cannot serve is a refusal (`kicked: false`), as the spec's reply table has it.
 */
export function kickTarget(
  scope: AdminScope,
  body: Record<string, unknown>,
  serverScope: string,
): { kind: "target"; target: KickTarget } | { kind: "refused"; reason: string } | { kind: "error"; message: string } {
  const { cid, client_id: clientId, account } = body;
  if (cid !== undefined && clientId !== undefined) return { kind: "error", message: "give cid or client_id, not both" };
  if (account !== undefined && typeof account !== "string")
    return { kind: "error", message: "account must be a string" };
  if (cid !== undefined) {
    if (typeof cid !== "number" || !Number.isSafeInteger(cid) || cid < 1)
      return { kind: "error", message: "cid must be a positive whole number, as list shows it" };
    if (scope.kind === "account")
      return {
        kind: "refused",
        reason: `a cid is unique on one gateway only: kick by cid on ${serverScope}.kick, or by client_id here`,
      };
    return { kind: "target", target: { cid } };
  }
  if (clientId === undefined) return { kind: "error", message: "kick needs cid or client_id" };
  if (typeof clientId !== "string") return { kind: "error", message: "client_id must be a string" };
  if (scope.kind === "account") {
    if (account !== undefined && account !== scope.account)
      return { kind: "refused", reason: `this is the scope of account ${scope.account}, not ${account}` };
    return { kind: "target", target: { clientId, account: scope.account } };
  }
  // A client ID is unique only within its account.
  if (account === undefined) return { kind: "refused", reason: "a kick by client_id names the account" };
  return { kind: "target", target: { clientId, account } };
}

/** One kick as an actor: the machine decides, this finds the client, kicks it and watches it leave. */
export const kickActor = (
  target: KickTarget,
  deps: { readonly clients: ClientRegistry; readonly registry: ActorRegistry; readonly timeoutMs: number },
  answer: (reply: KickReply) => void,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { clients } = deps;
    let handle: ClientHandle | undefined;
    const actor = yield* startMachine(adminKickMachine, {
      input: { timeoutMs: deps.timeoutMs },
      registry: deps.registry,
      on: {
        kick: () => {
          handle?.kick();
          // It may have left between the lookup and now, or left at once.
          if (handle && clients.get(handle.cid) !== handle) actor.send({ type: "GONE" });
        },
        kicked: ({ cid }) => answer({ kicked: true, cid }),
        failed: ({ reason }) => answer({ kicked: false, reason }),
      },
    });
    const unwatch = clients.onChange((change, h) => {
      if (change === "removed" && h === handle) actor.send({ type: "GONE" });
    });
    yield* Effect.addFinalizer(() => Effect.sync(unwatch));

    const found =
      "cid" in target
        ? [clients.get(target.cid)].filter((h) => h !== undefined)
        : clients.byClient(target.account, target.clientId);
    const [first] = found;
    if (found.length > 1) actor.send({ type: "AMBIGUOUS", cids: found.map((h) => h.cid).sort((a, b) => a - b) });
    else if (first === undefined) actor.send({ type: "NOT_FOUND", reason: notFound(target) });
    else {
      handle = first;
      actor.send({ type: "FOUND", cid: first.cid });
    }
    yield* awaitDone(actor);
  });

function notFound(target: KickTarget): string {
  return "cid" in target
    ? `no client with cid ${target.cid} on this gateway`
    : `no client with client_id ${JSON.stringify(target.clientId)} in account ${JSON.stringify(target.account)} on this gateway`;
}
