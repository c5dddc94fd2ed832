import { JetStreamApiError } from "@nats-io/jetstream";

/** nats-server's JSStreamNotFoundErr. */
const STREAM_NOT_FOUND = 10059;

/**
 * Whether a STREAM.INFO failed because the stream is not there: the only answer on which
 * the gateway makes one. A timeout or a leader being elected is not that (issue 22: a
 * timed-out read taken for "missing" made the gateway create what existed, or give up).
 */
export function isStreamMissing(e: unknown): boolean {
  return e instanceof JetStreamApiError && e.code === STREAM_NOT_FOUND;
}
