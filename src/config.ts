/** The configuration: its schema (config/schema.ts, config/targets.ts) and its loading (config/load.ts). */
export * from './config/load.js';
export * from './config/schema.js';
