/**
 * A receiving link's filter set in force (docs/decisions/amqp-filters.md): the messages
 * it passes, judged on the encoded message the client would get (which the link then
 * sends as is), and the filter entries the gateway's attach echoes so the client knows
 * which filters apply (part 3, 3.5.3).
 */
import { type CompiledFilters, compileFilterSet, type FilterRefusal } from "../../protocol/amqpFilterSet.js";
import { filterViewOf } from "../../protocol/amqpFilterView.js";
import type { Result } from "../../protocol/result.js";
import { err, ok } from "../../protocol/result.js";
import type { Pending } from "./feed.js";

export class LinkFilter {
  /** Messages that passed, encoded once: the link sends these bytes. */
  private readonly passed = new WeakMap<Pending, Uint8Array>();

  private constructor(
    private readonly compiled: CompiledFilters,
    private readonly requested: Readonly<Record<string, unknown>>,
    private readonly encode: (m: Pending) => Uint8Array,
  ) {}

  /** The link's filter, none when the source asks for none the gateway applies, or why the attach is refused. */
  static of(
    requested: Readonly<Record<string, unknown>> | null | undefined,
    encode: (m: Pending) => Uint8Array,
  ): Result<LinkFilter | undefined, FilterRefusal> {
    const compiled = compileFilterSet(requested);
    if (!compiled.ok) return err(compiled.error);
    if (!compiled.value || !requested) return ok(undefined);
    return ok(new LinkFilter(compiled.value, requested, encode));
  }

  passes(m: Pending): boolean {
    const bytes = this.encode(m);
    if (!this.compiled.test(filterViewOf(bytes))) return false;
    this.passed.set(m, bytes);
    return true;
  }

  /** The encoding `passes` made of a message, handed over once. */
  take(m: Pending): Uint8Array | undefined {
    const bytes = this.passed.get(m);
    this.passed.delete(m);
    return bytes;
  }

  /** The entries of the client's filter set that are in force, as it sent them. */
  echo(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const name of this.compiled.accepted) out[name] = this.requested[name];
    return out;
  }

  get names(): readonly string[] {
    return this.compiled.accepted;
  }

  /** The filters as canonical text (amqpFilterSet.ts): a durable subscription remembers it. */
  get identity(): string {
    return this.compiled.identity;
  }
}
