import type { DirectLastFor, JetStreamManager, StoredMsg } from "@nats-io/jetstream";

/** What one direct read of last messages brought, and the status that ended it early, if one did. */
export interface LastMessages {
  readonly messages: StoredMsg[];
  readonly error?: Error;
}

/**
 * The last message of each of `subjects` in one direct read (`$JS.API.DIRECT.GET`).
 *
 * nats.js answers this read as an iterator or through a callback. The iterator leaves the
 * read's reply subscription (a SUB on nats-server) and its 5 s timer behind when the batch
 * ends: the timer then fires, builds an error and only then unsubscribes, so every MQTT
 * SUBSCRIBE's retained lookup held a NATS subscription for 5 s. The callback form
 * unsubscribes as soon as the batch ends. An empty answer (404) ends it without an error.
 */
export function lastMessagesFor(
  jsm: JetStreamManager,
  stream: string,
  subjects: readonly string[],
  options: Omit<DirectLastFor, "multi_last" | "callback"> = {},
): Promise<LastMessages> {
  return new Promise((resolve) => {
    const messages: StoredMsg[] = [];
    jsm.direct
      .getLastMessagesFor(stream, {
        ...options,
        multi_last: [...subjects],
        callback: (done, m) => {
          if (!done) messages.push(m);
          else resolve(done.err ? { messages, error: done.err } : { messages });
        },
      })
      .catch((error: Error) => resolve({ messages, error }));
  });
}
