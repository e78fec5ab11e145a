package io.statusstore.agent.path;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The micro benchmark (agent/bench.sh) still runs on the classes it builds: small, and no figure is judged. */
class RouterBenchTest {
    private static final Pattern MEASURE = Pattern.compile("\"measure\": \"([a-z-]+)\", \"keys\": 200, ");

    @Test
    void theBenchmarkRunsEachMeasureToTheEnd() throws Exception {
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        new RouterBench(200, new PrintStream(printed, true, StandardCharsets.UTF_8)).run(1);
        List<String> measures = new ArrayList<>();
        for (String line : printed.toString(StandardCharsets.UTF_8).split("\n")) {
            Matcher m = MEASURE.matcher(line);
            if (m.find()) {
                measures.add(m.group(1));
            }
        }
        assertEquals(List.of("offer", "drain-sidecar", "drain-connect"), measures, printed.toString(StandardCharsets.UTF_8));
    }
}
