import { JetStreamApiError } from "@nats-io/jetstream";
import type { AccountServices } from "../accountServices.js";
import { recordedConsumer } from "./sessionConsumers.js";
import type { StoredSession } from "./sessionStore.js";

/** 10014: consumer not found. */
const CONSUMER_NOT_FOUND = 10014;

/**
 * Deletes a consumer of a session that ends: once, awaited; a delete that fails while the
 * cluster elects (a node lost) is tried again in the background, 1 to 8 s apart, so no
 * consumer is left to the sweep (orphanConsumers.ts) or its inactive threshold (nodeLoss
 * test: a delete right after a node was killed timed out, and the consumer stayed).
 */
export async function removeSessionConsumer(
  services: AccountServices,
  account: string,
  stream: string,
  name: string,
): Promise<void> {
  const once = async () => {
    const { jsm } = await services.jetstream(account);
    await jsm.consumers.delete(stream, name).catch((e: unknown) => {
      if (!(e instanceof JetStreamApiError && e.code === CONSUMER_NOT_FOUND)) throw e;
    });
  };
  const retry = (delayMs: number) =>
    setTimeout(() => once().catch(() => delayMs < 8_000 && retry(delayMs * 2)), delayMs).unref();
  await once().catch(() => retry(1_000));
}

/** The consumers a stored session's record names (a clean start or an expired session discards them). */
export async function removeRecordedConsumers(
  services: AccountServices,
  account: string,
  clientId: string,
  session: StoredSession,
): Promise<void> {
  await Promise.all(
    session.subscriptions
      .filter((s) => s.stream)
      .map((s) =>
        removeSessionConsumer(services, account, s.stream!, recordedConsumer(s, account, clientId, session.epoch)),
      ),
  );
}
