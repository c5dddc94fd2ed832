import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import type { StoredAck, StoredPublisher } from "./storedPublish.js";

/**
 * How long a stored QoS 1/2 publish may wait for its stream, from when the gateway read it
 * to its answer (PUBACK/PUBREC, or the refusal: 0x80 with a reason, a close for 3.1.1).
 * docs/decisions/faults.md: a node lost, a stream leader being elected, a nats-server whose
 * JetStream is still loading after a restart all end well inside it.
 */
export const STORED_ANSWER_MS = 30_000;
/** One request's wait for the stream's ack; a lost one is sent again (the same Nats-Msg-Id: stored once). */
export const STORED_ATTEMPT_MS = 5_000;

/**
 * What a stream that is coming back answers: nothing within the attempt (a leader
 * election, a request lost with a node) or, from a server that has JetStream (its INFO
 * says so), "no responders" (JetStream still loading its streams after a restart). From a
 * server without JetStream, "no responders" is the answer; so is anything else (a
 * refusal, a JetStream error).
 */
function answersLater(e: unknown, nc: NatsConnection): boolean {
  const message = (e as Error).message ?? "";
  return message === "timeout" || (/no responders/.test(message) && nc.info?.jetstream === true);
}

/**
 * A stored publish sent again, with the same Nats-Msg-Id (the stream keeps it once),
 * until the stream answers or `boundMs` has passed. Between sends after "no responders",
 * a short pause (250 ms doubling, at most 2 s) so a loading JetStream is not flooded.
 */
export async function publishPatiently(
  nc: NatsConnection,
  publisher: StoredPublisher,
  subject: string,
  payload: Uint8Array,
  headers: MsgHdrs,
  boundMs = STORED_ANSWER_MS,
): Promise<StoredAck> {
  const deadline = Date.now() + boundMs;
  for (let attempt = 1; ; attempt++) {
    const left = deadline - Date.now();
    try {
      return await publisher.publishWith(subject, payload, headers, Math.max(1, Math.min(STORED_ATTEMPT_MS, left)));
    } catch (e) {
      if (!answersLater(e, nc)) throw e;
      const pause = (e as Error).message === "timeout" ? 0 : Math.min(250 * 2 ** (attempt - 1), 2_000);
      if (deadline - Date.now() <= pause) throw e;
      if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
