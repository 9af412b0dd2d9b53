#include "republisher/shelf.h"

#include <mutex>

namespace tributary::pub {

std::shared_ptr<const RenderedView> Shelf::rendered() const {
  std::shared_lock lock(m_mutex);
  return m_rendered;
}

std::shared_ptr<const ListsView> Shelf::lists() const {
  std::shared_lock lock(m_mutex);
  return m_lists;
}

std::shared_ptr<const DumpsView> Shelf::dumps() const {
  std::shared_lock lock(m_mutex);
  return m_dumps;
}

void Shelf::put(std::shared_ptr<const RenderedView> view) {
  std::unique_lock lock(m_mutex);
  m_rendered.swap(view);
  // The view replaced is released outside the lock (`view` goes out of
  // scope after it): freeing a thousand documents never holds a request.
  lock.unlock();
}

void Shelf::put(std::shared_ptr<const ListsView> view) {
  std::unique_lock lock(m_mutex);
  m_lists.swap(view);
  lock.unlock();
}

void Shelf::put(std::shared_ptr<const DumpsView> view) {
  std::unique_lock lock(m_mutex);
  m_dumps.swap(view);
  lock.unlock();
}

void Shelf::put_removed_sources(std::set<std::string> names) {
  auto view = std::make_shared<const std::set<std::string>>(std::move(names));
  std::unique_lock lock(m_mutex);
  m_removed.swap(view);
  lock.unlock();
}

bool Shelf::removed_set(const std::string& set) const {
  std::shared_ptr<const std::set<std::string>> removed;
  {
    std::shared_lock lock(m_mutex);
    removed = m_removed;
  }
  if (removed->count(set)) {
    return true;
  }
  // A source's second and later sets: NAME-2, NAME-3, …
  const size_t dash = set.rfind('-');
  return dash != std::string::npos && dash + 1 < set.size() &&
         set.find_first_not_of("0123456789", dash + 1) == std::string::npos && removed->count(set.substr(0, dash));
}

std::shared_ptr<const CachedDocument> Shelf::document(const std::string& path) const {
  std::shared_lock lock(m_mutex);
  if (auto it = m_rendered->documents.find(path); it != m_rendered->documents.end()) {
    return it->second;
  }
  if (auto it = m_lists->documents.find(path);
      it != m_lists->documents.end() && m_rendered->set_feeds->count(it->second.set)) {
    return it->second.document;
  }
  return nullptr;
}

} // namespace tributary::pub
