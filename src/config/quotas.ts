// limits.per_client and limits.per_account: publish quotas, named as EMQX names its
// limiters (messages_rate, messages_burst, bytes_rate, bytes_burst) so its users find them
// (docs/decisions/quotas.md).
import * as z from "zod";
import { err, ok, type Result } from "../protocol/result.js";
import { parseRate, parseSize } from "./units.js";
import { always, count, fromParser, size } from "./values.js";

/** One publish quota, normalized: rates per second (0 = no limit), bursts the buckets' capacity. */
export interface PublishQuota {
  readonly messages_rate: number;
  readonly messages_burst: number;
  readonly bytes_rate: number;
  readonly bytes_burst: number;
}

export const NO_QUOTA: PublishQuota = { messages_rate: 0, messages_burst: 0, bytes_rate: 0, bytes_burst: 0 };

function messageCount(text: unknown): Result<number> {
  return typeof text === "string" && /^\d+(\.\d+)?$/.test(text)
    ? ok(Number(text))
    : err(`${JSON.stringify(text)} is not a number of messages`);
}

const messagesRate = fromParser((v) => parseRate(v, messageCount, "100/s"));
const bytesRate = fromParser((v) => parseRate(v, parseSize, "1MiB/s"));

/** A burst left out is one second of the rate (at least 1): what EMQX's users get by default too. */
const oneSecond = (rate: number) => (rate === 0 ? 0 : Math.max(1, Math.ceil(rate)));

const quotaObject = z
  .strictObject({
    messages_rate: messagesRate.prefault(0),
    messages_burst: count().min(1, "must be at least 1").optional(),
    bytes_rate: bytesRate.prefault(0),
    bytes_burst: size.pipe(z.number().min(1, "must be at least 1 byte")).optional(),
  })
  .superRefine((q, ctx) => {
    // A burst with no rate would limit nothing; say so rather than ignore it.
    for (const kind of ["messages", "bytes"] as const) {
      const quota = q as Record<string, unknown>;
      if (quota[`${kind}_burst`] !== undefined && quota[`${kind}_rate`] === 0)
        ctx.addIssue({
          code: "custom",
          path: [`${kind}_burst`],
          message: `needs ${kind}_rate (a burst without a rate limits nothing)`,
          input: quota[`${kind}_burst`],
        });
    }
  }, always)
  .transform(
    (q): PublishQuota => ({
      messages_rate: q.messages_rate,
      messages_burst: q.messages_rate === 0 ? 0 : (q.messages_burst ?? oneSecond(q.messages_rate)),
      bytes_rate: q.bytes_rate,
      bytes_burst: q.bytes_rate === 0 ? 0 : (q.bytes_burst ?? oneSecond(q.bytes_rate)),
    }),
  );

// YAML reads "per_client:" with nothing under it as null: all defaults, as an empty section.
export const publishQuota = z.preprocess((v) => (v === null ? undefined : v), quotaObject.prefault({}));
