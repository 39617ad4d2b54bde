package serve

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are a Server's Prometheus metrics, in a registry of its own. The nv_* names and
// meanings are Triton's (cumulative counters, durations in microseconds); loom_* are Loom's.
type metrics struct {
	reg          *prometheus.Registry
	success      *prometheus.CounterVec
	failure      *prometheus.CounterVec
	inferences   *prometheus.CounterVec
	executions   *prometheus.CounterVec
	requestUS    *prometheus.CounterVec
	queueUS      *prometheus.CounterVec
	computeUS    *prometheus.CounterVec
	batchSize    *prometheus.HistogramVec
	queueDepth   *prometheus.GaugeVec
	requestHisto *prometheus.HistogramVec
}

func newMetrics() *metrics {
	labels := []string{"model", "version"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &metrics{
		reg:        prometheus.NewRegistry(),
		success:    counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
		failure:    counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
		inferences: counter("nv_inference_count", "Number of inferences performed (a request of batch size n counts n)"),
		executions: counter("nv_inference_exec_count", "Number of model executions performed (a dynamic batch counts once)"),
		requestUS:  counter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (queue and compute)"),
		queueUS:    counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds"),
		computeUS:  counter("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds"),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_batch_size", Help: "Rows per model execution (dynamic batches; 1 for unbatched runs)",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}, labels),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "loom_queue_depth", Help: "Inference requests waiting in the model's queue",
		}, labels),
		requestHisto: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_request_duration_seconds", Help: "Inference request latency, parse to response (successful requests)",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, labels),
	}
	m.reg.MustRegister(m.success, m.failure, m.inferences, m.executions, m.requestUS, m.queueUS, m.computeUS,
		m.batchSize, m.queueDepth, m.requestHisto,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register creates a model version's series, so they read 0 before its first request.
func (mt *metrics) register(m *model) {
	for _, v := range []*prometheus.CounterVec{mt.success, mt.failure, mt.inferences, mt.executions, mt.requestUS, mt.queueUS, mt.computeUS} {
		v.WithLabelValues(m.name, m.version)
	}
	mt.queueDepth.WithLabelValues(m.name, m.version).Set(0)
}

// unregister drops an unloaded model version's series.
func (mt *metrics) unregister(m *model) {
	l := []string{m.name, m.version}
	for _, v := range []*prometheus.CounterVec{mt.success, mt.failure, mt.inferences, mt.executions, mt.requestUS, mt.queueUS, mt.computeUS} {
		v.DeleteLabelValues(l...)
	}
	mt.batchSize.DeleteLabelValues(l...)
	mt.queueDepth.DeleteLabelValues(l...)
	mt.requestHisto.DeleteLabelValues(l...)
}

// executed counts one model execution of rows rows that took compute.
func (mt *metrics) executed(m *model, rows int64, compute time.Duration) {
	m.stats.executed(rows, compute)
	mt.executions.WithLabelValues(m.name, m.version).Inc()
	mt.batchSize.WithLabelValues(m.name, m.version).Observe(float64(rows))
}

// request records a finished request of a known model.
func (mt *metrics) request(m *model, ok bool, rows int64, total, queue, compute time.Duration) {
	m.stats.request(ok, rows, total, queue, compute)
	l := []string{m.name, m.version}
	if !ok {
		mt.failure.WithLabelValues(l...).Inc()
		return
	}
	mt.success.WithLabelValues(l...).Inc()
	mt.inferences.WithLabelValues(l...).Add(float64(rows))
	mt.requestUS.WithLabelValues(l...).Add(float64(total.Microseconds()))
	mt.queueUS.WithLabelValues(l...).Add(float64(queue.Microseconds()))
	mt.computeUS.WithLabelValues(l...).Add(float64(compute.Microseconds()))
	mt.requestHisto.WithLabelValues(l...).Observe(total.Seconds())
}
