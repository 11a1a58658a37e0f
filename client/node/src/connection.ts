/**
 * How the client reaches the server: channel credentials (TLS), the bearer token, and the
 * back-off shared by long-poll re-sends and subscription resumes.
 *
 * Environment (the same variables as the Python clients), used when the option is absent:
 *   PURGATORY_TOKEN     bearer token sent as `authorization: Bearer <token>`
 *   PURGATORY_TLS_CA    PEM file of the CA that signed the server's certificate (turns TLS on)
 *   PURGATORY_TLS_CERT  PEM file of the client certificate (mutual TLS)
 *   PURGATORY_TLS_KEY   PEM file of the client certificate's key
 */
import * as fs from "node:fs";
import { credentials, Metadata, type ChannelCredentials } from "@grpc/grpc-js";

import type { RetryPolicy } from "./models.js";

export interface TlsOptions {
  /** PEM of the CA that signed the server's certificate (default: the system roots). */
  ca?: Buffer | string;
  /** Client certificate and key (PEM), for a server that asks for one (mutual TLS). */
  cert?: Buffer | string;
  key?: Buffer | string;
  /** Files to read those from, instead. */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /** Check the server's certificate against this name instead of the target's host. */
  serverName?: string;
}

function pem(value: Buffer | string | undefined, file: string | undefined): Buffer | null {
  if (value !== undefined) return Buffer.from(value);
  if (file !== undefined && file !== "") return fs.readFileSync(file);
  return null;
}

/** TLS options from the arguments, else from PURGATORY_TLS_*; undefined means plaintext. */
export function resolveTls(tls: boolean | TlsOptions | undefined): TlsOptions | undefined {
  const env = process.env;
  if (tls === false) return undefined;
  const fromEnv: TlsOptions = {
    caFile: env.PURGATORY_TLS_CA || undefined,
    certFile: env.PURGATORY_TLS_CERT || undefined,
    keyFile: env.PURGATORY_TLS_KEY || undefined,
  };
  if (tls === true) return fromEnv;
  if (tls !== undefined) return tls;
  return fromEnv.caFile || fromEnv.certFile ? fromEnv : undefined;
}

export function channelCredentials(tls: TlsOptions | undefined): ChannelCredentials {
  if (tls === undefined) return credentials.createInsecure();
  const cert = pem(tls.cert, tls.certFile);
  const key = pem(tls.key, tls.keyFile);
  if ((cert === null) !== (key === null)) {
    throw new TypeError("tls: cert and key go together (both or neither)");
  }
  return credentials.createSsl(pem(tls.ca, tls.caFile), key, cert);
}

/** Per-call metadata carrying the token, or undefined when there is none. */
export function authMetadata(token: string | undefined): Metadata | undefined {
  const value = token ?? process.env.PURGATORY_TOKEN;
  if (value === undefined || value === "") return undefined;
  const md = new Metadata();
  md.set("authorization", `Bearer ${value}`);
  return md;
}

export const DEFAULT_RETRY: Required<RetryPolicy> = {
  attempts: 8,
  initialDelayMs: 50,
  maxDelayMs: 2000,
};

export function retryPolicy(policy: RetryPolicy | undefined): Required<RetryPolicy> {
  return { ...DEFAULT_RETRY, ...(policy ?? {}) };
}

/** The back-off before retry number `failures` (0-based): doubled each time, capped. */
export function backoffMs(policy: Required<RetryPolicy>, failures: number): number {
  return Math.min(policy.initialDelayMs * 2 ** failures, policy.maxDelayMs);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
