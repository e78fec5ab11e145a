package io.statusstore.agent.connect;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts the records the status store's KafkaBasedLog hands its producer, and those whose outcome came back:
 * equal counts mean Connect's own path has nothing in flight. Connect's callbacks run behind its {@link GenerationGate}.
 */
final class SendCount {
    private final AtomicLong started = new AtomicLong();
    private final AtomicLong completed = new AtomicLong();
    /** Connect's callbacks run behind it while the agent writes a held status ({@link GenerationGate}). */
    final GenerationGate gate = new GenerationGate();

    long started() {
        return started.get();
    }

    long completed() {
        return completed.get();
    }

    /** The callback to hand the producer in place of Connect's: it counts the outcome, then calls Connect's. */
    Counting wrap(Callback connects) {
        started.incrementAndGet();
        return new Counting(connects);
    }

    /** Connect's callback, counted once when its outcome comes (or when the send threw instead). */
    final class Counting implements Callback {
        private final Callback connects;
        private final AtomicBoolean done = new AtomicBoolean();

        Counting(Callback connects) {
            this.connects = connects;
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            try {
                if (connects != null) {
                    gate.judge(() -> connects.onCompletion(metadata, exception));
                }
            } finally {
                done();
            }
        }

        /** Counted after Connect's callback ran, so a re-send it queued is already on the retry executor. */
        void done() {
            if (done.compareAndSet(false, true)) {
                completed.incrementAndGet();
            }
        }
    }
}
