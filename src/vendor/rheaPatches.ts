/**
 * rhea's smaller patches: its empty lists, its output once the socket is gone, and the
 * client's terminus the gateway echoes (part of the rhea vendor module, src/vendor/rhea.ts;
 * docs/decisions/vendor-patches.md).
 */
import { createRequire } from "node:module";

const req = createRequire(import.meta.url);
/** rhea's type of list0 (lib/types.js `define_type('List0', 0x45, undefined, [])`): `create` is what the reader and `types.List0` call. */
interface EmptyListType {
  create: (() => { value: unknown[] }) & { typecode?: number };
}
const typesModule = req("rhea/lib/types.js") as { by_code: Record<number, EmptyListType>; List0: unknown };
const list0 = typesModule.by_code[0x45]!;
type ConnectionOutput = (this: { socket?: { destroyed: boolean; writableEnded: boolean } }) => void;
const connectionModule = req("rhea/lib/connection.js") as { prototype: { output: ConnectionOutput } };
const originalOutput = connectionModule.prototype.output;
/**
 * Wraps lib/connection.js `Connection.prototype.output`: nothing is written, and no
 * heartbeat armed, once the socket is destroyed or ended. rhea clears its heartbeat
 * timers when the socket goes, but output after that (a credit the gateway grants when a
 * NATS flush answers for a client that left) armed them again: a 2 x idle-timeout timer
 * that held the connection, and kept a stopped gateway's process from exiting.
 */
const writeWhileOpen: ConnectionOutput = function () {
  const socket = this.socket;
  if (socket && (socket.destroyed || socket.writableEnded)) return;
  originalOutput.call(this);
};

/** Installs `writeWhileOpen` as rhea's `Connection.prototype.output`. */
export function outputWhileOpen(): void {
  connectionModule.prototype.output = writeWhileOpen;
}

/** The upstream functions these patches replace or wrap (test/vendor.test.ts pins them). */
export const upstreamPatches: Readonly<Record<string, unknown>> = {
  "lib/connection.js Connection.prototype.output": connectionModule.prototype.output,
  "lib/types.js List0 create": list0.create,
};

/**
 * Replaces lib/types.js list0's `create` (the reader's and `types.List0`'s): each empty
 * list gets its own array. rhea gives every list0 it reads or writes the one array its
 * type was defined with, and a composite read from one (a client's empty source or
 * target, as go-amqp and rhea write them) keeps that array as its fields: the first
 * field set on such a composite was set on every empty list of the process. The gateway
 * once filled it echoing a client's empty source (11 fields), and from then on each
 * empty target read back as 11 fields, which it echoed in its attach: go-amqp refused it
 * ("invalid field count 11 for 0x29", issue 22).
 */
export function freshEmptyList(): void {
  const shared = list0.create;
  // Each call makes a new Typed; only its value was shared.
  const fresh: EmptyListType["create"] = () => {
    const v = shared();
    v.value = [];
    return v;
  };
  fresh.typecode = shared.typecode;
  list0.create = fresh;
  typesModule.List0 = fresh;
}

/** Fields of each terminus type (part 3, 3.5.3 and 3.5.4). */
const TERMINUS_FIELDS = { source: 11, target: 7 } as const;

/**
 * A copy of the client's source or target to answer with (part 2, 2.6.3: the peer's
 * terminus echoed), as fields for `setLocalAttach`: its own list of at most the type's
 * fields. rhea's `set_source`/`set_target` given the client's composite itself would
 * share its list and write into it (see `freshEmptyList`), and echo any excess field.
 */
export function peerTerminus(l: object, which: "source" | "target"): Record<string, unknown> {
  const value = (l as unknown as Record<string, { value?: unknown } | null | undefined>)[which]?.value;
  // rhea's composite `create` copies a record's enumerable keys: `value` is its list.
  return { value: Array.isArray(value) ? value.slice(0, TERMINUS_FIELDS[which]) : [] };
}
