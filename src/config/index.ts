/** The configuration: its schema (config/schema.ts, config/targets.ts) and its loading (config/load.ts). */
export * from './load.js';
export * from './schema.js';
