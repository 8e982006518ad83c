import type Dockerode from 'dockerode';
import { SpcdError } from '../errors.js';
import { mapEngineError } from './map-error.js';
import type { ImageInfo, PullRequest } from './types.js';

interface ProgressLine {
  status?: string;
  id?: string;
  error?: string;
  errorDetail?: { message?: string };
  progressDetail?: { current?: number; total?: number };
}

/**
 * Pulls with an activity timeout: the pull fails when the registry sends
 * nothing for activityTimeoutMs, however long the whole pull takes. Errors
 * reported inside the stream (missing tag, bad credentials) become
 * IMAGE_PULL_FAILED.
 */
export async function pullImage(
  docker: Dockerode,
  req: PullRequest,
  imageInfo: (ref: string) => Promise<ImageInfo | undefined>,
): Promise<ImageInfo> {
  const ctl = new AbortController();
  const onOuter = (): void => ctl.abort(req.signal?.reason);
  req.signal?.addEventListener('abort', onOuter, { once: true });
  let idle: NodeJS.Timeout | undefined;
  let idleFired = false;
  const arm = (reject: (e: Error) => void): void => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      idleFired = true;
      ctl.abort(new Error('pull activity timeout'));
      reject(
        new SpcdError('IMAGE_PULL_FAILED', `pull ${req.image}: no progress for ${req.activityTimeoutMs} ms`, {
          image: req.image,
        }),
      );
    }, req.activityTimeoutMs);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      arm(reject);
      const opts: Record<string, unknown> = { abortSignal: ctl.signal };
      if (req.auth) opts.authconfig = req.auth;
      docker.pull(req.image, opts, (err: unknown, stream: NodeJS.ReadableStream | undefined) => {
        if (err || !stream) {
          reject(refused(err, req.image));
          return;
        }
        docker.modem.followProgress(
          stream,
          (doneErr: Error | null) => {
            if (idleFired) return;
            if (doneErr)
              reject(
                new SpcdError('IMAGE_PULL_FAILED', `pull ${req.image}: ${doneErr.message}`, {
                  image: req.image,
                }),
              );
            else resolve();
          },
          (line: ProgressLine) => {
            arm(reject);
            const failed = reportLine(req, line);
            if (failed) reject(failed);
          },
        );
      });
    });
  } finally {
    clearTimeout(idle);
    req.signal?.removeEventListener('abort', onOuter);
  }
  const info = await imageInfo(req.image);
  if (!info)
    throw new SpcdError('IMAGE_PULL_FAILED', `pull ${req.image}: image absent after pull`, {
      image: req.image,
    });
  return info;
}

/** The engine refused the pull: ENGINE_UNAVAILABLE as it is, anything else IMAGE_PULL_FAILED. */
function refused(err: unknown, image: string): SpcdError {
  const mapped = mapEngineError(err, `pull ${image}`);
  return mapped.code === 'ENGINE_UNAVAILABLE'
    ? mapped
    : new SpcdError('IMAGE_PULL_FAILED', mapped.message, { image, ...mapped.details }, { cause: err });
}

/** Reports one progress line; an error the registry sent inside the stream is returned as IMAGE_PULL_FAILED. */
function reportLine(req: PullRequest, line: ProgressLine): SpcdError | undefined {
  if (line.error || line.errorDetail) {
    return new SpcdError(
      'IMAGE_PULL_FAILED',
      `pull ${req.image}: ${line.errorDetail?.message ?? line.error}`,
      {
        image: req.image,
      },
    );
  }
  req.onProgress?.({
    image: req.image,
    status: line.status ?? '',
    ...(line.id ? { layer: line.id } : {}),
    ...(line.progressDetail?.current !== undefined ? { current: line.progressDetail.current } : {}),
    ...(line.progressDetail?.total !== undefined ? { total: line.progressDetail.total } : {}),
  });
  return undefined;
}
