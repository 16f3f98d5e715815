import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

/**
 * The scheduler table's key schema, shared by the CDK construct, the local stack and the tests
 * (one source of truth). Attribute `expiresAt` is the TTL attribute.
 */
export const TABLE_KEY = {
  partitionKey: 'pk',
  sortKey: 'sk',
  ttlAttribute: 'expiresAt',
} as const;

export function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: TABLE_KEY.partitionKey, AttributeType: 'S' },
      { AttributeName: TABLE_KEY.sortKey, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: TABLE_KEY.partitionKey, KeyType: 'HASH' },
      { AttributeName: TABLE_KEY.sortKey, KeyType: 'RANGE' },
    ],
  };
}
