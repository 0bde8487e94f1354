// Modules on several host threads at once (DataParallel's parallel_apply, sim ranks as threads):
// each thread's results equal a serial run's, bit for bit.
#include <gtest/gtest.h>

#include <thread>

#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "runtime/nn/reference.hpp"

namespace dpscope {
namespace {

// Three SGD steps of a 128-256-256-10 MLP seeded by `seed`; returns the final first weight.
std::vector<float> train(uint64_t seed) {
  auto model = Sequential::mlp("128-256-256-10", Device::cpu(), seed);
  SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  CrossEntropyLoss loss_fn;
  const Tensor x =
      Tensor::from_floats(testing::random_floats(64 * 128, static_cast<uint32_t>(seed)), {64, 128});
  std::vector<int64_t> y(64);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>((i * 7 + seed) % 10);
  const Tensor target = Tensor::from_ints(y, {64});
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    loss_fn.forward(model->forward(x), target);
    model->backward(loss_fn.backward());
    sgd.step();
  }
  return model->parameters()[0]->data.to_vector();
}

TEST(Threads, ConcurrentTrainingMatchesSerialTraining) {
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> serial(kThreads), parallel(kThreads);
  for (int i = 0; i < kThreads; ++i) serial[i] = train(static_cast<uint64_t>(i));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { parallel[i] = train(static_cast<uint64_t>(i)); });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(parallel[i], serial[i]) << "thread " << i;
}

}  // namespace
}  // namespace dpscope
