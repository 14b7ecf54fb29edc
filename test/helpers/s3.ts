/** An S3-compatible server (s3rver) in this process on a free port, with its own temp directory; never a shared one. */
import { rm } from 'node:fs/promises';
import S3rver from 's3rver';
import { tempDir } from './redis.js';

export interface S3Server {
  endpoint: string;
  /** the service env that puts blobs on this server, in `bucket` */
  env(bucket?: string): Record<string, string>;
  stop(): Promise<void>;
}

export async function startS3(): Promise<S3Server> {
  const dir = await tempDir('svc-s3-');
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir });
  const { port } = (await server.run()) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    env: (bucket = 'svc-test') => ({ S3_ENDPOINT: endpoint, S3_ACCESS_KEY: 'S3RVER', S3_SECRET_KEY: 'S3RVER', S3_BUCKET: bucket, S3_REGION: 'us-east-1', S3_USE_SSL: 'false' }),
    async stop() {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
