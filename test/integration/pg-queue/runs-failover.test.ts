/** ../runs-failover.test.ts again with the queues on BullMQ's PostgreSQL backend. */
process.env.TEST_QUEUE_BACKEND = 'postgres';
await import('../runs-failover.test.js');
