import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { TABLE_KEY } from '../core/model/index.js';

/** The scheduler table's key schema: defined in core/model/schema.ts (shared with the CDK construct). */
export { TABLE_KEY };

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
