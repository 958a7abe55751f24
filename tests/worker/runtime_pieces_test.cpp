// Unit tests of the runtime's pieces against hand-computed values: CRC32, the 1F1B schedule,
// layouts and their errors, the data loader, the TCP transport (real sockets, one thread per
// rank), checkpoint files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/worker/runtime_test_support.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/crc32.h"
#include "worker/runtime/data_loader.h"
#include "worker/runtime/gpu_selection.h"
#include "worker/runtime/job_options.h"
#include "worker/runtime/layout.h"
#include "worker/runtime/pipeline_schedule.h"
#include "process/free_port.h"
#include "worker/runtime/run_summary.h"
#include "worker/runtime/tcp_transport.h"

namespace flotilla::worker {
namespace {

using testing::fresh_dir;
using testing::write_text_file;

TEST(RuntimeCrc32, StandardCheckValue) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926U);
  EXPECT_EQ(crc32("", 0), 0U);
  std::uint32_t c = crc32_update(0, "1234", 4);
  EXPECT_EQ(crc32_update(c, "56789", 5), 0xCBF43926U);
}

TEST(RuntimeSchedule, OneFOneBMatchesHandWrittenOrder) {
  // Stage 0 of 2 with 4 micro-batches: one warm-up forward, then alternate, then drain.
  std::vector<PipelineOp> expect = {{true, 0},  {true, 1},  {false, 0}, {true, 2},
                                    {false, 1}, {true, 3},  {false, 2}, {false, 3}};
  EXPECT_EQ(one_f_one_b(0, 2, 4), expect);
  // The last stage alternates from the start.
  std::vector<PipelineOp> last = {{true, 0}, {false, 0}, {true, 1}, {false, 1}};
  EXPECT_EQ(one_f_one_b(1, 2, 2), last);
}

TEST(RuntimeSchedule, EveryOpOnceInOrderAndBoundedStash) {
  for (int p = 1; p <= 5; ++p)
    for (int s = 0; s < p; ++s)
      for (int n = 1; n <= 7; ++n) {
        auto ops = one_f_one_b(s, p, n);
        ASSERT_EQ(ops.size(), static_cast<std::size_t>(2 * n));
        int next_f = 0, next_b = 0, in_flight = 0, peak = 0;
        for (const auto& op : ops) {
          if (op.forward) {
            EXPECT_EQ(op.micro_batch, next_f++);
            peak = std::max(peak, ++in_flight);
          } else {
            EXPECT_EQ(op.micro_batch, next_b++);
            EXPECT_LT(op.micro_batch, next_f);
            --in_flight;
          }
        }
        EXPECT_LE(peak, std::min(p - s, n)) << "p=" << p << " s=" << s << " n=" << n;
      }
}

BatchGeometry geometry(int b, int m, int v) { return BatchGeometry{b, m, v}; }

// A model of NCCL point-to-point semantics, the worst case: a send completes only when the
// peer's matching receive reaches the head of the peer's stream for that channel; each
// (rank, channel) stream runs in order; a rank's host blocks on each of its receives. The
// trainer's 1F1B traffic must finish under it (nccl_communicator.h puts activations and
// activation gradients on separate channels); with one channel it deadlocks already at PP 2.
bool one_f_one_b_finishes_under_nccl_semantics(int pp, int micro_batches, bool split_channels) {
  struct Op {
    bool send;
    int channel, peer, micro_batch;
    bool done = false;
  };
  std::vector<std::vector<Op>> host(static_cast<std::size_t>(pp));
  for (int s = 0; s < pp; ++s)
    for (const PipelineOp& op : one_f_one_b(s, pp, micro_batches)) {
      auto& h = host[static_cast<std::size_t>(s)];
      const int act = 0, grad = split_channels ? 1 : 0;
      if (op.forward) {
        if (s > 0) h.push_back({false, act, s - 1, op.micro_batch});
        if (s < pp - 1) h.push_back({true, act, s + 1, op.micro_batch});
      } else {
        if (s < pp - 1) h.push_back({false, grad, s + 1, op.micro_batch});
        if (s > 0) h.push_back({true, grad, s - 1, op.micro_batch});
      }
    }
  std::map<std::pair<int, int>, std::deque<Op*>> streams;
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  std::vector<Op*> blocked(static_cast<std::size_t>(pp), nullptr);
  while (true) {
    bool progress = false;
    for (int s = 0; s < pp; ++s) {
      auto& b = blocked[static_cast<std::size_t>(s)];
      if (b != nullptr && b->done) b = nullptr, progress = true;
      auto& h = host[static_cast<std::size_t>(s)];
      while (b == nullptr && next[static_cast<std::size_t>(s)] < h.size()) {
        Op* op = &h[next[static_cast<std::size_t>(s)]++];
        streams[{s, op->channel}].push_back(op);
        if (!op->send) b = op;
        progress = true;
      }
    }
    for (auto& [key, q] : streams) {
      if (q.empty() || !q.front()->send) continue;
      auto& peer_q = streams[{q.front()->peer, key.second}];
      if (peer_q.empty() || peer_q.front()->send || peer_q.front()->peer != key.first ||
          peer_q.front()->micro_batch != q.front()->micro_batch)
        continue;
      q.front()->done = peer_q.front()->done = true;
      q.pop_front();
      peer_q.pop_front();
      progress = true;
    }
    bool finished = true;
    for (int s = 0; s < pp; ++s)
      finished = finished && next[static_cast<std::size_t>(s)] == host[static_cast<std::size_t>(s)].size() &&
                 (blocked[static_cast<std::size_t>(s)] == nullptr || blocked[static_cast<std::size_t>(s)]->done);
    for (auto& [key, q] : streams) finished = finished && q.empty();
    if (finished) return true;
    if (!progress) return false;
  }
}

TEST(RuntimeSchedule, NcclChannelsCannotDeadlockOneFOneB) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int n = 1; n <= 12; ++n)
      EXPECT_TRUE(one_f_one_b_finishes_under_nccl_semantics(pp, n, true))
          << "PP " << pp << ", " << n << " micro-batches";
  // The model can fail: one shared channel deadlocks (both neighbours send, then receive).
  EXPECT_FALSE(one_f_one_b_finishes_under_nccl_semantics(2, 2, false));
  EXPECT_FALSE(one_f_one_b_finishes_under_nccl_semantics(4, 8, false));
}

TEST(RuntimeLayout, EvenSplitGivesEarlierStagesTheRemainder) {
  auto l = std::get<Layout>(make_layout(4, 4, 1, 6, "", geometry(8, 1, 1)));
  ASSERT_EQ(l.stage_units.size(), 4U);
  EXPECT_EQ(l.partition_string(), "0:2,2:4,4:5,5:6");
  EXPECT_EQ(l.stage_of_unit(4), 2);
  auto dp = std::get<Layout>(make_layout(6, 3, 2, 6, "0:1,1:4,4:6", geometry(8, 1, 2)));
  EXPECT_EQ(dp.rank_of(2, 1), 5);
  EXPECT_EQ(dp.stage_of(4), 1);
  EXPECT_EQ(dp.dp_index_of(4), 1);
}

std::string layout_error(int world, int pp, int dp, const std::string& partition,
                         BatchGeometry g) {
  auto r = make_layout(world, pp, dp, 6, partition, g);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "";
}

TEST(RuntimeLayout, ImpossibleLayoutsSayWhy) {
  struct Case {
    int world, pp, dp;
    const char* partition;
    BatchGeometry geometry;
    const char* says;
  };
  const Case cases[] = {
      {7, 7, 1, "", geometry(8, 1, 1), "exceeds the model's 6 units"},
      {3, 2, 1, "", geometry(8, 1, 1), "is not --pp x --dp"},
      {3, 1, 3, "", geometry(8, 1, 4), "does not divide --virtual-shards"},
      {1, 1, 1, "", geometry(8, 3, 1), "not divisible"},
      {2, 1, 2, "", geometry(6, 2, 2), "not divisible"},
      {2, 2, 1, "0:2,3:6", geometry(8, 1, 1), "contiguous"},
      {2, 2, 1, "0:2,2:5", geometry(8, 1, 1), "covers units"},
      {2, 2, 1, "0:2,2:x", geometry(8, 1, 1), "first:end"},
  };
  for (const Case& c : cases)
    EXPECT_NE(layout_error(c.world, c.pp, c.dp, c.partition, c.geometry).find(c.says), std::string::npos) << c.says;
  EXPECT_EQ(layout_error(2, 2, 1, "0:5,5:6", geometry(8, 1, 1)), "");
}

TEST(RuntimeJobOptions, RoundTripsThroughArgs) {
  auto parsed = parse_job_options({"--pp", "3", "--dp", "2", "--virtual-shards", "4",
                                   "--partition", "0:1,1:4,4:6", "--data", "x.txt",
                                   "--checkpoint-dir", "ck", "--lr", "0.0007", "--steps", "9"});
  ASSERT_TRUE(std::holds_alternative<JobOptions>(parsed)) << std::get<std::string>(parsed);
  const auto& o = std::get<JobOptions>(parsed);
  EXPECT_EQ(o.world_size, 6);
  auto again = std::get<JobOptions>(parse_job_options(to_args(o)));
  EXPECT_EQ(again.model, o.model);
  EXPECT_EQ(again.train.lr, o.train.lr);
  EXPECT_EQ(again.layout.partition_string(), "0:1,1:4,4:6");
  EXPECT_EQ(again.geometry.virtual_shards, 4);
  EXPECT_EQ(again.comm, "auto");
  EXPECT_EQ(again.recv_timeout_s, 0);
  auto timed = std::get<JobOptions>(parse_job_options(
      {"--data", "x", "--checkpoint-dir", "c", "--recv-timeout", "2.5", "--connect-timeout", "9",
       "--backend", "cuda", "--comm", "nccl"}));
  auto timed_again = std::get<JobOptions>(parse_job_options(to_args(timed)));
  EXPECT_EQ(timed_again.recv_timeout_s, 2.5);
  EXPECT_EQ(timed_again.connect_timeout_s, 9);
  EXPECT_EQ(timed_again.comm, "nccl");
  EXPECT_EQ(std::get<std::string>(parse_job_options(
                {"--data", "x", "--checkpoint-dir", "c", "--comm", "nccl"})),
            "--comm nccl needs a CUDA backend (--backend cuda or cuda-tf32)");
  auto bad = parse_job_options({"--data", "x", "--checkpoint-dir", "c", "--model", "huge"});
  EXPECT_NE(std::get<std::string>(bad).find("unknown --model 'huge'"), std::string::npos);
  auto bad2 = parse_job_options({"--data", "x", "--checkpoint-dir", "c", "--pp", "two"});
  EXPECT_NE(std::get<std::string>(bad2).find("--pp 'two' is not a valid number"),
            std::string::npos);
}

TEST(RuntimeData, SamplesDependOnlyOnSeedStepAndIndex) {
  auto dir = fresh_dir("data_samples");
  auto path = write_text_file(dir, 5000);
  DataLoader a(path.string(), 16, 7), b(path.string(), 16, 7), other_seed(path.string(), 16, 8);
  std::string text = testing::read_file(path);
  // Micro-batch 1 of shard 1 with V=2, m=2, B=8 is samples 6 and 7 of the global batch.
  std::vector<std::int32_t> tok, tgt;
  a.micro_batch(BatchGeometry{8, 2, 2}, 3, 1, 1, tok, tgt);
  ASSERT_EQ(tok.size(), 32U);
  for (int s = 0; s < 2; ++s) {
    std::size_t off = b.sample_offset(3, 6 + s);
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(tok[static_cast<std::size_t>(s * 16 + t)],
                static_cast<unsigned char>(text[off + static_cast<std::size_t>(t)]));
      EXPECT_EQ(tgt[static_cast<std::size_t>(s * 16 + t)],
                static_cast<unsigned char>(text[off + static_cast<std::size_t>(t) + 1]));
    }
  }
  // The same sample seen through another geometry (V=1, m=4: micro-batch 1, second sample).
  std::vector<std::int32_t> tok2, tgt2;
  a.micro_batch(BatchGeometry{8, 4, 1}, 3, 0, 1, tok2, tgt2);
  EXPECT_TRUE(std::equal(tok.begin(), tok.end(), tok2.begin() + 32));
  EXPECT_NE(a.sample_offset(3, 0), a.sample_offset(4, 0));
  EXPECT_NE(a.sample_offset(3, 0), other_seed.sample_offset(3, 0));
}

TEST(RuntimeData, MissingOrTooSmallFileIsAClearError) {
  auto dir = fresh_dir("data_errors");
  try {
    DataLoader d((dir / "nope.txt").string(), 16, 1);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be opened"), std::string::npos);
  }
  std::ofstream(dir / "small.txt") << "tiny";
  try {
    DataLoader d((dir / "small.txt").string(), 16, 1);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least seq_len + 2 = 18"), std::string::npos);
  }
}

void exchange_on_mesh(const std::string& master_addr);

TEST(RuntimeTransport, MeshExchangesLargeMessagesBothWaysWithoutDeadlock) {
  exchange_on_mesh("127.0.0.1");
}

// The multi-host path: listen on all interfaces, learn peers' addresses from rank 0.
TEST(RuntimeTransport, MeshWorksThroughANonLoopbackAddress) {
  std::string ip;
  FILE* p = ::popen("hostname -I 2>/dev/null", "r");
  if (p != nullptr) {
    char buf[256] = {};
    if (std::fgets(buf, sizeof buf, p) != nullptr) ip = std::string(buf).substr(0, std::string(buf).find_first_of(" \n"));
    ::pclose(p);
  }
  if (ip.empty() || ip.find(':') != std::string::npos || ip.rfind("127.", 0) == 0)
    GTEST_SKIP() << "this machine has no non-loopback IPv4 address";
  exchange_on_mesh(ip);
}

void exchange_on_mesh(const std::string& master_addr) {
  const int world = 3;
  const int port = process::pick_free_port();
  const std::size_t n = 1 << 21;  // 8 MiB: far beyond socket buffers
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto t = TcpTransport::connect({r, world, master_addr, port});
        // Everyone sends to everyone first, then receives: needs non-blocking sends.
        for (int p = 0; p < world; ++p) {
          if (p == r) continue;
          std::vector<float> msg(n, static_cast<float>(r * 10 + p));
          t->send_vec(p, 7, msg);
        }
        for (int p = 0; p < world; ++p) {
          if (p == r) continue;
          std::vector<float> got(n);
          t->recv_vec(p, 7, got);
          if (got.front() != static_cast<float>(p * 10 + r) || got.back() != got.front())
            errors[static_cast<std::size_t>(r)] = "wrong payload";
        }
        // A tag mismatch is an error naming both tags.
        if (r == 0) t->send(1, 8, "x", 1);
        if (r == 1) {
          char c = 0;
          try {
            t->recv(0, 9, &c, 1);
            errors[1] = "tag mismatch not detected";
          } catch (const std::exception& e) {
            if (std::string(e.what()).find("expected tag 9") == std::string::npos)
              errors[1] = e.what();
          }
        }
        t->flush();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

// A peer that stays connected but never sends: recv gives up after recv_timeout with one line
// naming the peer and the awaited message; a peer that goes away is named at once.
TEST(RuntimeTransport, SilentPeerTimesOutAndClosedPeerIsNamed) {
  const int port = process::pick_free_port();
  std::string error_silent, error_closed;
  double waited_s = 0;
  std::thread peer([&] {
    auto t = TcpTransport::connect({1, 2, "127.0.0.1", port});
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  {
    RendezvousConfig config{0, 2, "127.0.0.1", port};
    config.recv_timeout = std::chrono::milliseconds(400);
    auto t = TcpTransport::connect(config);
    t->name_tags({"", "", "the answer"});
    std::vector<float> v(4);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      t->recv_vec(1, 2, v);
    } catch (const std::exception& e) {
      error_silent = e.what();
    }
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    try {
      t->recv_vec(1, 5, v);  // the peer exits after 1.5 s; the timeout is 0.4 s, so loop
    } catch (const std::exception& e) {
      error_closed = e.what();
    }
    for (int i = 0; i < 10 && error_closed.find("closed") == std::string::npos; ++i) {
      try {
        t->recv_vec(1, 5, v);
      } catch (const std::exception& e) {
        error_closed = e.what();
      }
    }
  }
  peer.join();
  EXPECT_EQ(error_silent,
            "timed out after 0.4 s waiting for rank 1 to send the answer (tag 2): that rank is "
            "hung, stopped or unreachable (raise --recv-timeout / FLOTILLA_RECV_TIMEOUT_S if a "
            "step legitimately takes longer)");
  EXPECT_GE(waited_s, 0.39);
  EXPECT_LT(waited_s, 1.4);
  EXPECT_EQ(error_closed,
            "rank 1 closed its connection (it exited or was killed) while this rank waited for a "
            "message with tag 5");
}

// A peer that went away is named the same way when this rank notices it while sending (the
// kernel answers EPIPE/ECONNRESET) as when it notices it while receiving: which of the two a
// rank is doing when its peer is killed is a race, and the user should read one line either way.
TEST(RuntimeTransport, ClosedPeerIsNamedWhenSendingToo) {
  const int port = process::pick_free_port();
  std::thread peer([&] { auto t = TcpTransport::connect({1, 2, "127.0.0.1", port}); });  // leaves at once
  auto t = TcpTransport::connect({0, 2, "127.0.0.1", port});
  peer.join();
  std::string error;
  const std::vector<float> big(1 << 20, 1.0f);  // 4 MiB: beyond the socket buffers
  for (int i = 0; i < 50 && error.empty(); ++i) {
    try {
      t->send_vec(1, 3, big);
      t->flush();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  EXPECT_EQ(error, "rank 1 closed its connection (it exited or was killed) while this rank sent to it");
}

// A rank that never shows up: rank 0 gives up after connect_timeout, and so does a rank
// whose rank 0 never listens, each with one line saying what it waited for.
TEST(RuntimeTransport, RendezvousWithAMissingRankTimesOut) {
  RendezvousConfig lonely{0, 2, "127.0.0.1", process::pick_free_port()};
  lonely.connect_timeout = std::chrono::milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    TcpTransport::connect(lonely);
    ADD_FAILURE() << "rendezvous without rank 1 succeeded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "rendezvous timed out after 0.3 s waiting for the other ranks to join"),
              std::string::npos)
        << e.what();
  }
  RendezvousConfig orphan{1, 2, "127.0.0.1", process::pick_free_port()};
  orphan.connect_timeout = std::chrono::milliseconds(300);
  try {
    TcpTransport::connect(orphan);
    ADD_FAILURE() << "rendezvous without rank 0 succeeded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rendezvous timed out after 0.3 s connecting to 127.0.0.1:"),
              std::string::npos)
        << e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 3.0);
}

TEST(RuntimeTransport, TimeoutsComeFromTheEnvironment) {
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "1", 1);
  ::setenv("FLOTILLA_RECV_TIMEOUT_S", "2.5", 1);
  ::setenv("FLOTILLA_CONNECT_TIMEOUT_S", "7", 1);
  auto c = rendezvous_from_env();
  EXPECT_EQ(c.recv_timeout.count(), 2500);
  EXPECT_EQ(c.connect_timeout.count(), 7000);
  ::setenv("FLOTILLA_RECV_TIMEOUT_S", "soon", 1);
  try {
    rendezvous_from_env();
    ADD_FAILURE() << "a malformed timeout was accepted";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              "environment variable FLOTILLA_RECV_TIMEOUT_S='soon' is not a positive number of "
              "seconds");
  }
  for (const char* v : {"RANK", "WORLD_SIZE", "FLOTILLA_RECV_TIMEOUT_S", "FLOTILLA_CONNECT_TIMEOUT_S"})
    ::unsetenv(v);
  EXPECT_EQ(RendezvousConfig{}.recv_timeout.count(), 300000);
  EXPECT_EQ(RendezvousConfig{}.connect_timeout.count(), 60000);
}

TEST(RuntimeGpuSelection, OneDevicePerLocalRankFromTheVisibleList) {
  // FLOTILLA_VISIBLE_GPUS wins over CUDA_VISIBLE_DEVICES, which wins over counting devices.
  EXPECT_EQ(gpu_for_local_rank(1, "4,5, 6", "0,1", 8), "5");
  EXPECT_EQ(gpu_for_local_rank(2, "4,5, 6", "0,1", 8), "6");
  EXPECT_EQ(gpu_for_local_rank(3, nullptr, "2,3", 8), "3");
  EXPECT_EQ(gpu_for_local_rank(3, "", "GPU-a1,GPU-b2", 0), "GPU-b2");
  EXPECT_EQ(gpu_for_local_rank(5, nullptr, nullptr, 4), "1");  // round robin
  EXPECT_EQ(gpu_for_local_rank(0, nullptr, nullptr, 0), "");   // nothing to choose from
  EXPECT_EQ(gpu_for_local_rank(0, nullptr, "7", 1), "7");      // idempotent in the rank
  EXPECT_EQ(distinct_gpus(4, nullptr, "0,1", 2), 2);          // NCCL would refuse 4 ranks
  EXPECT_EQ(distinct_gpus(2, nullptr, nullptr, 8), 2);
  EXPECT_EQ(split_gpu_list(",0,,1,"), (std::vector<std::string>{"0", "1"}));
}

TEST(RuntimeRunSummary, RoundTripsAndSaysHowFarTheRunGot) {
  auto dir = fresh_dir("run_summary");
  EXPECT_FALSE(read_run_summary(dir).has_value());
  EXPECT_EQ(summary_line(std::nullopt, 10, -1, 1.25, false),
            "FAILED: no step completed in this run (1.2 s); no complete checkpoint");
  // Resumed at 4, finished step 9: 6 steps of 8 x 64 tokens = 3072 tokens in 1.5 s training.
  write_run_summary(dir, 4, 10, 3072.0, 1.5, 2.71828);
  auto s = read_run_summary(dir);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->steps_completed, 10);
  EXPECT_EQ(s->tokens_this_run, 3072.0);
  EXPECT_EQ(summary_line(s, 10, 10, 3.0, true),
            "finished: 6 steps this run (steps 4..9 of 10), last complete checkpoint at step 10, "
            "2048 tokens/s while training, 1024 tokens/s over 3.0 s wall, last loss 2.7183");
  EXPECT_FALSE(std::filesystem::exists(run_summary_path(dir).string() + ".tmp"));
  // A diverged run: NaN is written as JSON null and must not make the launcher throw.
  write_run_summary(dir, 0, 3, 768.0, 0.5, std::nan(""));
  auto diverged = read_run_summary(dir);
  ASSERT_TRUE(diverged.has_value());
  EXPECT_TRUE(std::isnan(diverged->last_loss));
  EXPECT_EQ(diverged->steps_completed, 3);
  EXPECT_NE(summary_line(diverged, 3, 3, 1.0, true).find("last loss nan"), std::string::npos);
}

TEST(RuntimeCheckpoint, UnitFileRoundTripsAndCorruptionIsNamed) {
  auto dir = fresh_dir("ckpt_unit");
  std::vector<float> p = {1.5f, -2.0f, 3.25f}, m = {0.1f, 0.2f, 0.3f}, v = {4, 5, 6};
  auto folder = step_folder(dir, 12);
  EXPECT_EQ(folder.filename(), "step_00000012");
  auto info = write_unit_file(folder, 3, p, m, v);
  EXPECT_EQ(info.bytes, 24U + 3 * 3 * 4);
  auto s = read_unit_file(folder, info);
  EXPECT_EQ(s.params, p);
  EXPECT_EQ(s.m, m);
  EXPECT_EQ(s.v, v);
  EXPECT_FALSE(find_latest_complete(dir).has_value());  // no DONE yet
  write_meta_and_done(folder, "{}");
  ASSERT_TRUE(find_latest_complete(dir).has_value());
  EXPECT_EQ(find_latest_complete(dir)->step, 12);
  {
    std::fstream f(folder / info.file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x7f');
  }
  try {
    read_unit_file(folder, info);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("is corrupt: CRC32"), std::string::npos) << e.what();
  }
}

TEST(RuntimeCheckpoint, PruneKeepsNewestCompleteAndDropsStaleIncomplete) {
  auto dir = fresh_dir("ckpt_prune");
  std::vector<float> x = {1.0f};
  for (int step : {2, 4, 6, 8}) {
    write_unit_file(step_folder(dir, step), 0, x, x, x);
    if (step != 6) write_meta_and_done(step_folder(dir, step), "{}");
  }
  write_unit_file(step_folder(dir, 10), 0, x, x, x);  // in progress: newer than newest complete
  prune_checkpoints(dir, 2);
  EXPECT_FALSE(std::filesystem::exists(step_folder(dir, 2)));
  EXPECT_TRUE(std::filesystem::exists(step_folder(dir, 4)));
  EXPECT_FALSE(std::filesystem::exists(step_folder(dir, 6)));
  EXPECT_TRUE(std::filesystem::exists(step_folder(dir, 8)));
  EXPECT_TRUE(std::filesystem::exists(step_folder(dir, 10)));
  EXPECT_EQ(find_latest_complete(dir)->step, 8);
}

}  // namespace
}  // namespace flotilla::worker
