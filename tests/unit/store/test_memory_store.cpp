#include "store/memory_store.h"

#include "../../common/store_contract.h"

TEST_CASE("MemoryStore: the store contract") {
  tributary::test::store_contract([] { return std::make_unique<tributary::store::MemoryStore>(); });
}
