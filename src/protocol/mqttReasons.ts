/** MQTT 5 reason codes the gateway sends, by name (MQTT 5.0 section 2.4). */
export const Reason = {
  success: 0x00,
  noSubscriptionExisted: 0x11,
  unspecified: 0x80,
  malformedPacket: 0x81,
  protocolError: 0x82,
  implementationSpecific: 0x83,
  unsupportedProtocolVersion: 0x84,
  clientIdNotValid: 0x85,
  badUserNameOrPassword: 0x86,
  notAuthorized: 0x87,
  serverUnavailable: 0x88,
  banned: 0x8a,
  badAuthenticationMethod: 0x8c,
  serverShuttingDown: 0x8b,
  keepAliveTimeout: 0x8d,
  sessionTakenOver: 0x8e,
  topicFilterInvalid: 0x8f,
  topicNameInvalid: 0x90,
  packetIdNotFound: 0x92,
  receiveMaximumExceeded: 0x93,
  topicAliasInvalid: 0x94,
  packetTooLarge: 0x95,
  quotaExceeded: 0x97,
  administrativeAction: 0x98,
  payloadFormatInvalid: 0x99,
  retainNotSupported: 0x9a,
  qosNotSupported: 0x9b,
  sharedSubscriptionsNotSupported: 0x9e,
  wildcardSubscriptionsNotSupported: 0xa2,
} as const;

/** MQTT 3.1.1 CONNACK return codes (section 3.2.2.3). */
export const ConnackV4 = {
  accepted: 0,
  unacceptableProtocolVersion: 1,
  identifierRejected: 2,
  serverUnavailable: 3,
  badUserNameOrPassword: 4,
  notAuthorized: 5,
} as const;

/** 3.1.1 SUBACK failure. */
export const SubackFailureV4 = 0x80;
