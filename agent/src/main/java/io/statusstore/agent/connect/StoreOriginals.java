package io.statusstore.agent.connect;

import io.statusstore.agent.path.ConnectPath;
import io.statusstore.agent.status.StatusUpdate;
import org.apache.kafka.connect.runtime.ConnectorStatus;
import org.apache.kafka.connect.runtime.TaskStatus;
import org.apache.kafka.connect.runtime.TopicStatus;
import org.apache.kafka.connect.storage.StatusBackingStore;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Connect's own path through the bound store: its original methods, and whether anything it started is still
 * in flight. Connect re-sends a failed write from its producer callback on a single retry thread (KAFKA-14902,
 * 3.5+), forever for retriable errors: a record is settled when its callback ran, and a re-send that callback
 * queued has run once a marker task queued after it has.
 */
final class StoreOriginals implements ConnectPath {
    private static final Runnable MARKER = () -> { };

    private final StatusBackingStore store;
    private final SendCount sends;
    private final ExecutorService retryExecutor;

    StoreOriginals(StatusBackingStore store, SendCount sends, ExecutorService retryExecutor) {
        this.store = store;
        this.sends = sends;
        this.retryExecutor = retryExecutor;
    }

    @Override
    public void write(StatusUpdate u) {
        StoreHooks.original(() -> {
            switch (u.kind) {
                case CONNECTOR:
                    if (u.safe) {
                        store.putSafe((ConnectorStatus) u.source);
                    } else {
                        store.put((ConnectorStatus) u.source);
                    }
                    break;
                case TASK:
                    if (u.safe) {
                        store.putSafe((TaskStatus) u.source);
                    } else {
                        store.put((TaskStatus) u.source);
                    }
                    break;
                case TOPIC:
                    store.put((TopicStatus) u.source);
                    break;
                case DELETE_TOPIC:
                    store.deleteTopic(u.connector, u.topic);
                    break;
                default:
                    throw new IllegalStateException(u.kind.toString());
            }
        });
    }

    @Override
    public boolean quiet(long timeoutMs) {
        long started = sends.started();
        if (StoreHooks.originalsRunning() > 0 || sends.completed() != started) {
            return false;
        }
        if (retryExecutor != null) {
            try {
                retryExecutor.submit(MARKER).get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException e) {
                // Shut down with the store: no re-send can run any more.
            } catch (TimeoutException e) {
                return false;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            } catch (ExecutionException e) {
                return false;
            }
        }
        return StoreHooks.originalsRunning() == 0 && sends.started() == started && sends.completed() == started;
    }
}
